import { readRateLimit, readWholeSeconds } from '../config/rate-limit.ts';
import { UsageError, stringList, stringValue, type ParsedArgs } from './command.ts';

/**
 * The flags of `keys update` and `keys rotate`, read into the HTTP API's JSON bodies, so the
 * API's own schemas validate them (src/keys/create-request.ts, the rotate body): the CLI
 * refuses exactly what the API refuses, with the same field names. What cannot be read at all
 * (`--rate-limit fast`, `--grace soon`) is wrong usage; what reads but is out of the API's
 * range (`--rate-limit 0/1m`) is the API's `validation_failed`.
 */

/** The options of `keys update`, each a field of the PATCH body. */
export const UPDATE_OPTIONS = {
  name: { type: 'string' },
  scope: { type: 'string', multiple: true },
  'agent-id': { type: 'string' },
  'no-agent': { type: 'boolean' },
  'expires-at': { type: 'string' },
  'no-expiry': { type: 'boolean' },
  'rate-limit': { type: 'string' },
  'no-rate-limit': { type: 'boolean' },
  disable: { type: 'boolean' },
  enable: { type: 'boolean' },
} as const;

export const UPDATE_OPTION_HELP: Record<keyof typeof UPDATE_OPTIONS, string> = {
  name: 'a new name',
  scope: 'a scope the key keeps or gets; the scopes given replace all of its scopes',
  'agent-id': 'bind the key to this agent (a positive integer)',
  'no-agent': 'unbind it: any agent',
  'expires-at': 'ISO 8601 date-time with a time zone, in the future',
  'no-expiry': 'the key never expires',
  'rate-limit': 'N/DURATION: at most N requests per DURATION, e.g. 100/1m, 5/1s, 10000/1d',
  'no-rate-limit': 'remove the key\'s own rate limit',
  disable: 'refuse the key (401 disabled_credential) until --enable; it still counts towards the licence',
  enable: 'accept it again (refused when the licence cap is reached)',
};

/** Flags that say opposite things about one field. */
const EXCLUSIVE: ReadonlyArray<readonly [string, string]> = [
  ['agent-id', 'no-agent'],
  ['expires-at', 'no-expiry'],
  ['rate-limit', 'no-rate-limit'],
  ['disable', 'enable'],
];

/** The PATCH body (JSON merge patch) the flags of `keys update` stand for. */
export function updateBodyOf(args: ParsedArgs): Record<string, unknown> {
  const given = (name: string) => args.values[name] !== undefined && args.values[name] !== false;
  for (const [one, other] of EXCLUSIVE) {
    if (given(one) && given(other)) throw new UsageError(`--${one} and --${other} cannot be used together`);
  }
  const body: Record<string, unknown> = {};
  const name = stringValue(args, 'name');
  if (name !== undefined) body.name = name;
  const scopes = stringList(args, 'scope');
  if (scopes !== undefined) body.scopes = scopes;
  const agentId = stringValue(args, 'agent-id');
  // A number when it reads as one, so the body's own rule (a positive integer) decides, as on create.
  if (agentId !== undefined) body.agent_id = /^-?[0-9]+$/.test(agentId) ? Number(agentId) : agentId;
  if (given('no-agent')) body.agent_id = null;
  const expiresAt = stringValue(args, 'expires-at');
  if (expiresAt !== undefined) body.expires_at = expiresAt;
  if (given('no-expiry')) body.expires_at = null;
  const rateLimit = rateLimitFlagOf(args);
  if (rateLimit !== undefined) body.rate_limit = rateLimit;
  if (given('disable')) body.enabled = false;
  if (given('enable')) body.enabled = true;
  if (Object.keys(body).length === 0) {
    throw new UsageError(`nothing to change: give at least one of ${Object.keys(UPDATE_OPTIONS).map((option) => `--${option}`).join(', ')}`);
  }
  return body;
}

/** `--rate-limit N/DURATION` or `--no-rate-limit` (null), as the body's `rate_limit`; undefined when neither is given. */
export function rateLimitFlagOf(args: ParsedArgs): { requests: number; per_seconds: number } | null | undefined {
  const text = stringValue(args, 'rate-limit');
  if (text !== undefined && args.values['no-rate-limit'] === true) throw new UsageError('--rate-limit and --no-rate-limit cannot be used together');
  if (text !== undefined) return parseRateLimit(text);
  return args.values['no-rate-limit'] === true ? null : undefined;
}

/** `100/1m` → `{ requests: 100, per_seconds: 60 }`; `100/m` reads as `100/1m` (src/config/rate-limit.ts's grammar). */
export function parseRateLimit(text: string): { requests: number; per_seconds: number } {
  const read = readRateLimit(text);
  if (!read.ok) throw new UsageError(`--rate-limit: ${read.problem}`);
  return { requests: read.value.requests, per_seconds: read.value.perSeconds };
}

/** `--grace 0`, `90s`, `15m`, `24h`, `7d` or plain seconds, as the rotate body's `grace_seconds`. */
export function parseGrace(text: string): number {
  const read = readWholeSeconds(text);
  if (!read.ok) throw new UsageError(`--grace: ${read.problem}`);
  return read.value;
}
