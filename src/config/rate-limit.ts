/**
 * Rate limits as they are written (docs/api-keys.md, "Rate limits"): the API's
 * `{requests, per_seconds}` bounds, and the `N/DURATION` text of `DEFAULT_KEY_RATE_LIMIT` and
 * the CLI's `--rate-limit`.
 */

/** At most `requests` over any interval of `perSeconds`: never a fixed window, never a burst above it. */
export interface RateRule {
  readonly requests: number;
  readonly perSeconds: number;
}

export const RATE_LIMIT_BOUNDS = {
  requests: { min: 1, max: 1_000_000 },
  perSeconds: { min: 1, max: 86_400 },
} as const;

export type Reading<T> = { ok: true; value: T } | { ok: false; problem: string };

/**
 * `100/1m` → 100 per 60 s; `100/m` reads as `100/1m`. The numbers are read, not bounded: the
 * caller's rules say what is allowed (the API's schema, or `withinBounds`).
 */
export function readRateLimit(text: string): Reading<RateRule> {
  const match = /^([0-9]+)\/(.+)$/.exec(text.trim());
  if (match === null) return { ok: false, problem: `'${text}' is not N/DURATION: a number of requests, '/' and a duration, e.g. 100/1m, 5/1s or 10000/1d` };
  const per = readWholeSeconds(/^(ms|s|m|h|d)$/.test(match[2]!) ? `1${match[2]}` : match[2]!);
  if (!per.ok) return per;
  return { ok: true, value: { requests: bounded(Number(match[1])), perSeconds: per.value } };
}

/** The API's bounds, as one line naming what is out of them. */
export function withinBounds(rule: RateRule): Reading<RateRule> {
  const { requests, perSeconds } = RATE_LIMIT_BOUNDS;
  if (rule.requests < requests.min || rule.requests > requests.max) return { ok: false, problem: `requests must be ${requests.min} to ${requests.max.toLocaleString('en')}` };
  if (rule.perSeconds < perSeconds.min || rule.perSeconds > perSeconds.max) return { ok: false, problem: `the duration must be 1 s to 24 h (${perSeconds.max} s)` };
  return { ok: true, value: rule };
}

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/**
 * A duration (a whole number, then `ms`, `s`, `m`, `h` or `d`; seconds without one) in whole
 * seconds; 0 is read (the caller's rules decide whether it is allowed).
 */
export function readWholeSeconds(text: string): Reading<number> {
  const match = /^([0-9]+)(ms|s|m|h|d)?$/.exec(text);
  if (match === null) return { ok: false, problem: `'${text}' is not a duration: a whole number and a unit, s, m, h or d, e.g. 30s, 15m, 24h, 7d` };
  const value = Number(match[1]);
  const unit = match[2] ?? 's';
  if (unit === 'ms') {
    // Whole seconds are counted; rounding 1500ms would change what was asked.
    if (value % 1000 !== 0) return { ok: false, problem: `'${text}' is not a whole number of seconds` };
    return { ok: true, value: bounded(value / 1000) };
  }
  return { ok: true, value: bounded(value * UNIT_SECONDS[unit]!) };
}

/** Past any range allowed, a number too large to be exact is still too large, not a different number. */
function bounded(value: number): number {
  return Number.isSafeInteger(value) ? value : Number.MAX_SAFE_INTEGER;
}
