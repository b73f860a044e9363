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
  const rateLimit = stringValue(args, 'rate-limit');
  if (rateLimit !== undefined) body.rate_limit = parseRateLimit(rateLimit);
  if (given('no-rate-limit')) body.rate_limit = null;
  if (given('disable')) body.enabled = false;
  if (given('enable')) body.enabled = true;
  if (Object.keys(body).length === 0) {
    throw new UsageError(`nothing to change: give at least one of ${Object.keys(UPDATE_OPTIONS).map((option) => `--${option}`).join(', ')}`);
  }
  return body;
}

/** `100/1m` → `{ requests: 100, per_seconds: 60 }`; `100/m` reads as `100/1m`. */
export function parseRateLimit(text: string): { requests: number; per_seconds: number } {
  const match = /^([0-9]+)\/(.+)$/.exec(text);
  if (match === null) {
    throw new UsageError(`--rate-limit: '${text}' is not N/DURATION: a number of requests, '/' and a duration, e.g. 100/1m, 5/1s or 10000/1d`);
  }
  const per = durationSeconds('--rate-limit', /^(ms|s|m|h|d)$/.test(match[2]!) ? `1${match[2]}` : match[2]!);
  return { requests: bounded(Number(match[1])), per_seconds: per };
}

/** `--grace 0`, `90s`, `15m`, `24h`, `7d` or plain seconds, as the rotate body's `grace_seconds`. */
export function parseGrace(text: string): number {
  return durationSeconds('--grace', text);
}

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/**
 * A duration (src/config/duration.ts's grammar: a whole number, then `ms`, `s`, `m`, `h` or `d`;
 * seconds without one) in whole seconds; 0 is read (the API's rules decide whether it is allowed).
 */
function durationSeconds(flag: string, text: string): number {
  const match = /^([0-9]+)(ms|s|m|h|d)?$/.exec(text);
  if (match === null) throw new UsageError(`${flag}: '${text}' is not a duration: a whole number and a unit, s, m, h or d, e.g. 30s, 15m, 24h, 7d`);
  const value = Number(match[1]);
  const unit = match[2] ?? 's';
  if (unit === 'ms') {
    // The API counts whole seconds; rounding 1500ms would change what was asked.
    if (value % 1000 !== 0) throw new UsageError(`${flag}: '${text}' is not a whole number of seconds`);
    return bounded(value / 1000);
  }
  return bounded(value * UNIT_SECONDS[unit]!);
}

/** Past any range the API allows, a number too large to be exact is still too large (the schema says so), not a different number. */
function bounded(value: number): number {
  return Number.isSafeInteger(value) ? value : Number.MAX_SAFE_INTEGER;
}
