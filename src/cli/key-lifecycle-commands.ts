import { loadConfig } from '../config/load.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { parseUpdateKeyRequest, rotateKeyBodySchema, updateKeyBodySchema, validated } from '../keys/create-request.ts';
import { DEFAULT_GRACE_SECONDS } from '../keys/key-service.ts';
import { toRecord, type ApiKeyRecord } from '../keys/record.ts';
import { EXIT_OK, EXIT_REFUSED, stringValue, type CliIo, type Command } from './command.ts';
import { withStore } from './context.ts';
import { JSON_HELP, JSON_OPTION, describe, describeRateLimit, keyIdOf, keyServiceOf } from './key-commands.ts';
import { UPDATE_OPTIONS, UPDATE_OPTION_HELP, parseGrace, updateBodyOf } from './key-flags.ts';
import { printFields, printJson } from './output.ts';
import { describeBarrier, withRevocations } from './revocations.ts';

/** `keys show`, `keys update` and `keys rotate`: the key lifecycle of GET, PATCH and POST …/rotate on /api/v1/api-keys/{id}. */

export const keysShow: Command = {
  name: 'keys show',
  summary: 'Show one API key of the configured store.',
  synopsis: '<id> [--json]',
  description: ['The same record as GET /api/v1/api-keys/{id}; never the raw key. An unknown id is refused (exit 1, not_found).'],
  options: { ...JSON_OPTION },
  optionHelp: { ...JSON_HELP },
  positionals: { min: 1, max: 1 },
  async run(io, args) {
    const id = keyIdOf(args);
    return withStore(io.env, async (context) => {
      const record = toRecord(await keyServiceOf(context).getKey(id), context.now());
      if (args.values.json) printJson(io, record);
      else printRecord(io, record);
      return EXIT_OK;
    });
  },
};

export const keysUpdate: Command = {
  name: 'keys update',
  summary: 'Change an API key in the configured store: name, scopes, agent, expiry, rate limit, enabled.',
  synopsis:
    '<id> [--name <name>] [--scope <scope>]... [--agent-id <id> | --no-agent] [--expires-at <date-time> | --no-expiry] ' +
    '[--rate-limit <n>/<duration> | --no-rate-limit] [--disable | --enable] [--json]',
  description: [
    'The same as PATCH /api/v1/api-keys/{id}: the create\'s validation for each field given, fields',
    'not given left alone, the licence cap when the key would count again (enabled, or an expired',
    'key given a later expiry), audit events (key_updated, key_disabled, key_enabled). A revoked',
    'key, or a rotated key\'s expiry moved later, is refused (exit 1).',
    'With REDIS_URL set, every running gateway applies the change before the command exits, as',
    'with keys revoke; running an update again announces the key\'s state again even when it',
    'changes nothing (after a store_unavailable, for example).',
  ],
  options: { ...UPDATE_OPTIONS, ...JSON_OPTION },
  optionHelp: { ...UPDATE_OPTION_HELP, ...JSON_HELP },
  positionals: { min: 1, max: 1 },
  async run(io, args) {
    const id = keyIdOf(args);
    const body = updateBodyOf(args);
    // Validated before the store opens, by the PATCH body's own schema.
    const config = loadConfig(io.env);
    const patch = parseUpdateKeyRequest(updateKeyBodySchema(config.knownScopes), body, new Date());
    return withStore(
      io.env,
      (context) =>
        withRevocations(io, context, async (revocations) => {
          const started = context.now();
          // Announced even when it changes nothing: the retry of a change Redis could not confirm.
          const row = await keyServiceOf(context, revocations.listener).updateKey(id, patch, context.actor);
          // updated_at not moved by this call: the key already was so.
          const unchanged = row.updatedAt.getTime() < started.getTime();
          const record = toRecord(row, context.now());
          if (args.values.json) printJson(io, record);
          else io.stdout.write(`${unchanged ? 'unchanged' : 'updated'} API key ${describe(record)}\n`);
          const barrier = describeBarrier(revocations.last());
          if (barrier !== undefined) io.stderr.write(`${barrier}\n`);
          return EXIT_OK;
        }),
      config,
    );
  },
};

export const keysRotate: Command = {
  name: 'keys rotate',
  summary: 'Replace an API key by a new one; the old one keeps working for a grace period.',
  synopsis: '<id> [--grace <duration>] [--json]',
  description: [
    'The same as POST /api/v1/api-keys/{id}/rotate: the new key copies the old one\'s name, agent,',
    'scopes, expiry, rate limit and enabled state; the old one works until the grace period ends',
    '(default 24h; 0 revokes it at once), and a predecessor still in its own grace period is revoked.',
    'Prints the new raw key alone on stdout (KEY=$(gatehouse keys rotate 12)) and the records on',
    'stderr; with --json, the new record and the key as one object. The key is shown only once.',
    'With REDIS_URL set, every running gateway applies the change before the command exits; if',
    'Redis cannot confirm, the key is still printed and the command exits 1 (store_unavailable).',
  ],
  options: { grace: { type: 'string' }, ...JSON_OPTION },
  optionHelp: { grace: 'how long the old key keeps working: 0, 30m, 24h, 7d, … up to 30d (default 24h)', ...JSON_HELP },
  positionals: { min: 1, max: 1 },
  async run(io, args) {
    const id = keyIdOf(args);
    const graceSeconds = graceOf(stringValue(args, 'grace'));
    return withStore(io.env, (context) =>
      withRevocations(io, context, async (revocations) => {
        // Stored before the replicas are told: when telling them fails, the service still gives the new key (`unconfirmed`).
        const { row, key, old, unconfirmed } = await keyServiceOf(context, revocations.listener).rotateKey(id, graceSeconds, context.actor);
        const now = context.now();
        const rotated = { record: toRecord(row, now), key, old: toRecord(old, now) };
        const barrier = describeBarrier(revocations.last());
        return unconfirmed === undefined ? printRotated(io, rotated, args.values.json === true, barrier) : printUnconfirmed(io, rotated, args.values.json === true, unconfirmed);
      }),
    );
  },
};

/** `--grace` as the rotate body's `grace_seconds`, validated by that body's schema. */
function graceOf(text: string | undefined): number {
  if (text === undefined) return DEFAULT_GRACE_SECONDS;
  return validated(rotateKeyBodySchema, { grace_seconds: parseGrace(text) }).grace_seconds ?? DEFAULT_GRACE_SECONDS;
}

interface Rotated {
  record: ApiKeyRecord;
  key: string;
  old: ApiKeyRecord;
}

function printRotated(io: CliIo, { record, key, old }: Rotated, json: boolean, barrier: string | undefined): number {
  if (barrier !== undefined) io.stderr.write(`${barrier}\n`);
  if (json) {
    printJson(io, { ...record, key });
    return EXIT_OK;
  }
  io.stderr.write(`rotated API key ${old.id} into ${describe(record)}\n${oldKeyFate(old)}\nthe new key is shown only this once:\n`);
  io.stdout.write(`${key}\n`);
  return EXIT_OK;
}

/** Stored but not confirmed by Redis: the new key all the same, then the refusal (exit 1, as keys revoke). */
function printUnconfirmed(io: CliIo, rotated: Rotated, json: boolean, error: unknown): number {
  const code = error instanceof GatewayError ? error.code : 'internal_error';
  const message =
    `the rotation is stored and the new key is printed, but Redis could not confirm that every running gateway applied it ` +
    `(${error instanceof Error ? error.message : String(error)}); gateways re-read key ${rotated.old.id} within KEY_CACHE_TTL` +
    (rotated.old.status === 'revoked' ? `, or run 'gatehouse keys revoke ${rotated.old.id}' to announce it again` : '');
  if (json) {
    printJson(io, { ...rotated.record, key: rotated.key, error: { code, message } });
  } else {
    io.stderr.write(`rotated API key ${rotated.old.id} into ${describe(rotated.record)}\n${oldKeyFate(rotated.old)}\nthe new key is shown only this once:\n`);
    io.stdout.write(`${rotated.key}\n`);
  }
  io.stderr.write(`gatehouse: ${message}\n`);
  return EXIT_REFUSED;
}

function oldKeyFate(old: ApiKeyRecord): string {
  if (old.status === 'revoked') return `the old key ${old.id} is revoked (no grace period)`;
  if (old.status === 'disabled') return `the old key ${old.id} stays disabled and expires ${old.expires_at}`;
  return `the old key ${old.id} keeps working until ${old.expires_at}`;
}

/** `keys show` for people: one field a line, the API's names. */
function printRecord(io: CliIo, record: ApiKeyRecord): void {
  printFields(io, [
    ['id', record.id],
    ['name', record.name],
    ['key_prefix', record.key_prefix],
    ['status', record.status],
    ['enabled', String(record.enabled)],
    ['agent_id', record.agent_id ?? 'any agent'],
    ['scopes', record.scopes.join(' ')],
    ['expires_at', record.expires_at ?? 'never'],
    ['rate_limit', record.rate_limit === null ? 'none' : describeRateLimit(record.rate_limit)],
    ['created_at', record.created_at],
    ['updated_at', record.updated_at],
    ['last_used_at', record.last_used_at ?? 'never'],
    ['rotated_from', record.rotated_from],
    ['rotated_to', record.rotated_to],
  ]);
}
