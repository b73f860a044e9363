import { loadConfig } from '../config/load.ts';
import { createKeyBodySchema, parseCreateKeyRequest } from '../keys/create-request.ts';
import { KeyService, type KeyStateListener } from '../keys/key-service.ts';
import { toRecord, type ApiKeyRecord } from '../keys/record.ts';
import { EXIT_OK, UsageError, requiredString, stringList, stringValue, type Command, type ParsedArgs } from './command.ts';
import { withStore, type StoreContext } from './context.ts';
import { UPDATE_OPTION_HELP, rateLimitFlagOf } from './key-flags.ts';
import { printJson, printTable } from './output.ts';
import { describeBarrier, withRevocations } from './revocations.ts';

export const JSON_OPTION = { json: { type: 'boolean' } } as const;
export const JSON_HELP = { json: 'print JSON (the HTTP API\'s record format)' };
const CANONICAL_ID = /^[1-9][0-9]{0,15}$/;

/**
 * The key service on the configured store, as the gateway builds it: same licence cap, same
 * serialised create. This process has no key cache of its own; `listener` reaches the running
 * gateways' (see `withRevocations`).
 */
export function keyServiceOf(context: StoreContext, listener: KeyStateListener = { keyChanged: async () => {} }): KeyService {
  return new KeyService({
    store: context.store,
    hasher: context.hasher,
    licenceLimit: context.config.licence.apiKeys,
    defaultRateLimit: context.config.env.DEFAULT_KEY_RATE_LIMIT ?? null,
    listener,
    now: context.now,
  });
}

export const keysCreate: Command = {
  name: 'keys create',
  summary: 'Create an API key directly in the configured store.',
  synopsis: '--name <name> [--agent-id <id>] [--scope <scope>]... [--expires-at <date-time>] [--rate-limit N/DURATION | --no-rate-limit] [--json]',
  description: [
    'The same rules as POST /api/v1/api-keys: the create body\'s validation, the licence cap',
    '(LICENSE_API_KEYS) and an audit event (actor_kind "cli"). Omitted scopes mean events:write;',
    'without --rate-limit or --no-rate-limit the key gets DEFAULT_KEY_RATE_LIMIT, if set.',
    'Prints the raw key alone on stdout (KEY=$(gatehouse keys create --name x)) and the record',
    'on stderr; with --json, the record and the key as one object. The key is shown only once.',
  ],
  options: {
    name: { type: 'string' },
    'agent-id': { type: 'string' },
    scope: { type: 'string', multiple: true },
    'expires-at': { type: 'string' },
    'rate-limit': { type: 'string' },
    'no-rate-limit': { type: 'boolean' },
    ...JSON_OPTION,
  },
  optionHelp: {
    name: 'what the key is for (required)',
    'agent-id': 'bind the key to this agent (a positive integer); default: any agent',
    scope: 'a scope to grant, e.g. events:write, mcp:agents',
    'expires-at': 'ISO 8601 date-time with a time zone, e.g. 2027-01-01T00:00:00Z',
    'rate-limit': UPDATE_OPTION_HELP['rate-limit'],
    'no-rate-limit': 'no rate limit of its own, whatever DEFAULT_KEY_RATE_LIMIT says',
    ...JSON_HELP,
  },
  async run(io, args) {
    const body: Record<string, unknown> = { name: requiredString(args, 'name') };
    const agentId = stringValue(args, 'agent-id');
    // A number when it reads as one, so the body's own rule (a positive integer) decides.
    if (agentId !== undefined) body.agent_id = /^-?[0-9]+$/.test(agentId) ? Number(agentId) : agentId;
    const scopes = stringList(args, 'scope');
    if (scopes !== undefined) body.scopes = scopes;
    const expiresAt = stringValue(args, 'expires-at');
    if (expiresAt !== undefined) body.expires_at = expiresAt;
    const rateLimit = rateLimitFlagOf(args);
    if (rateLimit !== undefined) body.rate_limit = rateLimit;
    // Validated before the store opens: a refusal costs nothing and touches nothing.
    const config = loadConfig(io.env);
    const input = parseCreateKeyRequest(createKeyBodySchema(config.knownScopes), body, new Date());
    return withStore(io.env, async (context) => {
      const { row, key } = await keyServiceOf(context).createKey(input, context.actor);
      const record = toRecord(row, context.now());
      if (args.values.json) {
        printJson(io, { ...record, key });
      } else {
        io.stderr.write(`created API key ${describe(record)}\nthe key is shown only this once:\n`);
        io.stdout.write(`${key}\n`);
      }
      return EXIT_OK;
    }, config);
  },
};

export const keysList: Command = {
  name: 'keys list',
  summary: 'List the API keys in the configured store (revoked and expired ones too).',
  synopsis: '[--json]',
  description: ['The same records as GET /api/v1/api-keys; never a raw key.'],
  options: { ...JSON_OPTION },
  optionHelp: { ...JSON_HELP },
  async run(io, args) {
    return withStore(io.env, async (context) => {
      const now = context.now();
      const records = (await context.store.listApiKeys()).map((row) => toRecord(row, now));
      if (args.values.json) {
        printJson(io, records);
      } else {
        printTable(
          io,
          ['ID', 'PREFIX', 'STATUS', 'AGENT', 'SCOPES', 'EXPIRES', 'LAST USED', 'NAME'],
          records.map((r) => [r.id, r.key_prefix, r.status, r.agent_id, r.scopes.join(','), r.expires_at, r.last_used_at, r.name]),
        );
      }
      return EXIT_OK;
    });
  },
};

export const keysRevoke: Command = {
  name: 'keys revoke',
  summary: 'Revoke an API key in the configured store.',
  synopsis: '<id> [--json]',
  description: [
    'The same as DELETE /api/v1/api-keys/{id}: idempotent (a revoked key stays revoked, with its',
    'first revocation time), an unknown id is refused (exit 1), and an audit event is written.',
    'With REDIS_URL set, every running gateway drops the key before the command exits, as with',
    'DELETE; if Redis cannot confirm, the revocation is stored and the command fails with',
    'store_unavailable (run it again). Without Redis, gateways on PostgreSQL re-read the key',
    'within KEY_CACHE_TTL (default 5m); a gateway on the embedded store holds it alone.',
  ],
  options: { ...JSON_OPTION },
  optionHelp: { ...JSON_HELP },
  positionals: { min: 1, max: 1 },
  async run(io, args) {
    const id = keyIdOf(args);
    return withStore(io.env, (context) =>
      withRevocations(io, context, async (revocations) => {
        const row = await keyServiceOf(context, revocations.listener).revokeKey(id, context.actor);
        const record = toRecord(row, context.now());
        if (args.values.json) printJson(io, record);
        else io.stdout.write(`revoked API key ${describe(record)}\n`);
        const barrier = describeBarrier(revocations.last());
        if (barrier !== undefined) io.stderr.write(`${barrier}\n`);
        return EXIT_OK;
      }),
    );
  },
};

/** The key id argument (`keys show|update|rotate|revoke <id>`): a canonical positive integer, or wrong usage. */
export function keyIdOf(args: ParsedArgs): number {
  const id = args.positionals[0]!;
  if (!CANONICAL_ID.test(id) || !Number.isSafeInteger(Number(id))) throw new UsageError(`the key id must be a positive integer, got '${id}'`);
  return Number(id);
}

/** One line about a key for people: never the raw key. */
export function describe(record: ApiKeyRecord): string {
  const agent = record.agent_id === null ? 'any agent' : `agent ${record.agent_id}`;
  const expires = record.expires_at === null ? 'never expires' : `expires ${record.expires_at}`;
  const disabled = record.enabled ? '' : ', disabled';
  const limit = record.rate_limit === null ? '' : `, ${describeRateLimit(record.rate_limit)}`;
  return `${record.id} "${record.name}" (${record.key_prefix}…, ${record.scopes.join(' ')}, ${agent}, ${expires}${limit}${disabled})`;
}

export function describeRateLimit(limit: NonNullable<ApiKeyRecord['rate_limit']>): string {
  return `${limit.requests} request(s) per ${limit.per_seconds}s`;
}
