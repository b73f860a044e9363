import type { OutgoingMessage } from 'node:http';
import { policyNameOf, type Quota } from '../policy/rate-limits.ts';

/**
 * The `RateLimit-Policy` and `RateLimit` response fields of the IETF draft "RateLimit header
 * fields for HTTP" (draft-ietf-httpapi-ratelimit-headers; docs/api-keys.md, "Rate limits"): one
 * list member per limit the request was counted against, named `key` or `tool:<name>`.
 * `RateLimit-Policy: "key";q=100;w=60` is the limit; `RateLimit: "key";r=42;t=17`, what is left
 * and the seconds until more is (the oldest request counted leaves the interval).
 */
export const RATE_LIMIT_POLICY = 'ratelimit-policy';
export const RATE_LIMIT = 'ratelimit';

/** The names the gateway sets on a limited key's answer: the upstream's own fields of these names are not passed on. */
export const GATEWAY_RATE_LIMIT_FIELDS: ReadonlySet<string> = new Set([RATE_LIMIT_POLICY, RATE_LIMIT]);

export function rateLimitPolicyOf(quotas: readonly Quota[]): string {
  return quotas.map(({ charge }) => `"${policyNameOf(charge)}";q=${charge.rule.requests};w=${charge.rule.perSeconds}`).join(', ');
}

export function rateLimitOf(quotas: readonly Quota[]): string {
  return quotas.map(({ charge, remaining, resetSeconds }) => `"${policyNameOf(charge)}";r=${remaining};t=${resetSeconds}`).join(', ');
}

/** Both fields as a flat `[name, value, …]` list, for a head written in one go (the relay's). */
export function rateLimitFields(quotas: readonly Quota[]): string[] {
  return [RATE_LIMIT_POLICY, rateLimitPolicyOf(quotas), RATE_LIMIT, rateLimitOf(quotas)];
}

/** Sets both fields on an answer not yet sent; whatever writes its head later keeps them. */
export function setRateLimitHeaders(response: OutgoingMessage, quotas: readonly Quota[] | undefined): void {
  if (quotas === undefined || quotas.length === 0 || response.headersSent) return;
  response.setHeader(RATE_LIMIT_POLICY, rateLimitPolicyOf(quotas));
  response.setHeader(RATE_LIMIT, rateLimitOf(quotas));
}

/** The fields set on `response` by `setRateLimitHeaders`, flat, for a head written in one go; undefined when none were. */
export function rateLimitFieldsSetOn(response: OutgoingMessage): string[] | undefined {
  if (!hasGatewayRateLimit(response)) return undefined;
  return [RATE_LIMIT_POLICY, String(response.getHeader(RATE_LIMIT_POLICY)), RATE_LIMIT, String(response.getHeader(RATE_LIMIT))];
}

/** Whether the gateway set its own fields on this answer (an upstream's of the same names are then dropped). */
export function hasGatewayRateLimit(response: OutgoingMessage): boolean {
  return response.hasHeader(RATE_LIMIT);
}
