import type { RateRule } from '../config/rate-limit.ts';
import type { Tables } from '../config/tables.ts';
import type { ApiKeyPrincipal } from './principal.ts';

export type { RateRule } from '../config/rate-limit.ts';

/**
 * The rate limits a request is counted against (docs/api-keys.md, "Rate limits"), as
 * `decide()` names them: pure data, no counting. The counting itself is the limiter's
 * (src/limits/rate-limiter.ts, or shared by the replicas through Redis), which answers
 * with a `Counted` that `decide()` then turns into an allow or a `429 rate_limited`.
 */

export type LimitKind = 'key' | 'tool';

/** One count a request must pass: its key's own limit, or a tool's limit counted for that key. */
export interface Charge {
  readonly limit: LimitKind;
  readonly keyId: number;
  /** The tool, for a tool limit (`tools/call` of it). */
  readonly tool: string | undefined;
  readonly rule: RateRule;
  /** How many this request counts: 1, the number of messages of a batch (the key's limit), or of calls of the tool in it. */
  readonly times: number;
}

/** A limit's state after a request, for the `RateLimit-Policy` and `RateLimit` headers. */
export interface Quota {
  readonly charge: Charge;
  /** Left in the interval. */
  readonly remaining: number;
  /** Seconds until `remaining` grows (the oldest request counted leaves the interval); 0 when none is counted. */
  readonly resetSeconds: number;
}

/**
 * `resetSeconds` from the milliseconds until a limit's oldest count leaves it: whole seconds,
 * rounded up, and never more than the limit's interval (the `t` of `RateLimit` never exceeds
 * the `w` of `RateLimit-Policy`, docs/api-keys.md). A shared count can be told a reset past the
 * interval (a lease counts until an interval after it lapses): it is told as the interval.
 */
export function resetSecondsOf(rule: RateRule, ms: number): number {
  return Math.min(rule.perSeconds, Math.max(0, Math.ceil(ms / 1000)));
}

/** What counting a request's charges gave: every charge counted, or none (the first refusing one named). */
export type Counted =
  | { readonly admitted: true; readonly quotas: readonly Quota[] }
  | { readonly admitted: false; readonly quotas: readonly Quota[]; readonly refused: Charge; /** Seconds, ≥ 1. */ readonly retryAfter: number };

/**
 * The request is allowed if its charges can be counted: `decide()`'s answer once every other
 * rule has passed, when a limit applies. The pipeline counts them and asks again with `counted`.
 */
export interface Count {
  readonly allow: 'count';
  readonly charges: readonly Charge[];
}

/** The key's own limit as a charge of one request, or undefined for a key without one. */
export function keyChargeOf(key: ApiKeyPrincipal): Charge | undefined {
  return key.rateLimit === null ? undefined : { limit: 'key', keyId: key.keyId, tool: undefined, rule: key.rateLimit, times: 1 };
}

const NO_CHARGES: readonly Charge[] = Object.freeze([]);

/**
 * What a request made with `key` is counted against: the key's own limit (once per message:
 * a JSON-RPC batch of n is n requests, and one without a body is one), and each limited tool
 * its `tools/call` messages call (once per call). `messages` are the decided JSON-RPC messages
 * of an MCP request, every one of them allowed.
 */
export function chargesOf(key: ApiKeyPrincipal, messages: readonly unknown[] | undefined, tables: Tables): readonly Charge[] {
  const own = keyChargeOf(key);
  const counted = own === undefined || messages === undefined || messages.length <= 1 ? own : { ...own, times: messages.length };
  const limits = tables.mcp.limits;
  if (messages === undefined || limits.size === 0) return counted === undefined ? NO_CHARGES : [counted];
  const charges: Charge[] = counted === undefined ? [] : [counted];
  for (const message of messages) {
    const tool = calledTool(message);
    const rule = tool === undefined ? undefined : limits.get(tool);
    if (rule === undefined) continue;
    const index = charges.findIndex((charge) => charge.tool === tool);
    if (index === -1) charges.push({ limit: 'tool', keyId: key.keyId, tool, rule, times: 1 });
    else charges[index] = { ...charges[index]!, times: charges[index]!.times + 1 };
  }
  return charges;
}

/** The tool a `tools/call` message calls (decide() has checked its shape). */
export function calledTool(message: unknown): string | undefined {
  if (typeof message !== 'object' || message === null || (message as { method?: unknown }).method !== 'tools/call') return undefined;
  const name = (message as { params?: { name?: unknown } }).params?.name;
  return typeof name === 'string' ? name : undefined;
}

/** The policy's name in the headers: `key`, or `tool:<name>`. */
export function policyNameOf(charge: Charge): string {
  return charge.tool === undefined ? 'key' : `tool:${charge.tool}`;
}
