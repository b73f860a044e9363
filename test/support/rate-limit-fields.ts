import { expect } from 'vitest';

/** One limit of an answer's `RateLimit-Policy` and `RateLimit` fields. */
export interface RateLimitField {
  q: number;
  w: number;
  r: number;
  t: number;
}

/**
 * The limit named `name` (`key`, `tool:<name>`) in an answer's `RateLimit-Policy` and
 * `RateLimit` fields, checked as docs/api-keys.md ("Rate limits") promises: both fields name
 * it, and `t` is a whole number of seconds from 0 to the policy's `w`, never more.
 */
export function rateLimitField(headers: Headers, name = 'key'): RateLimitField {
  const policy = memberOf(headers.get('ratelimit-policy'), name);
  const state = memberOf(headers.get('ratelimit'), name);
  const q = Number(/;q=(\d+)(?:;|$)/.exec(policy)?.[1]);
  const w = Number(/;w=(\d+)(?:;|$)/.exec(policy)?.[1]);
  const r = Number(/;r=(\d+)(?:;|$)/.exec(state)?.[1]);
  const t = Number(/;t=(\d+)(?:;|$)/.exec(state)?.[1]);
  for (const value of [q, w, r, t]) expect(Number.isInteger(value)).toBe(true);
  expect(t).toBeGreaterThanOrEqual(0);
  expect(t).toBeLessThanOrEqual(w);
  return { q, w, r, t };
}

function memberOf(field: string | null, name: string): string {
  const member = (field ?? '').split(', ').find((each) => each.startsWith(`"${name}";`));
  expect(member, `a "${name}" member in ${field}`).toBeDefined();
  return member!;
}
