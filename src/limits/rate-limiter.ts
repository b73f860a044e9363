import { resetSecondsOf, type Charge, type Counted, type Quota } from '../policy/rate-limits.ts';
import { SlidingLog } from './sliding-log.ts';

/**
 * Counts the charges `decide()` names (docs/api-keys.md, "Rate limits"): all of a request's
 * charges, or none of them, so a request refused by one limit uses up nothing of another.
 * In this process alone (`LocalRateLimiter`), or shared by every replica through Redis
 * (src/redis/shared-rate-limiter.ts).
 */
export interface RateLimiter {
  /** Counts every charge, or none. A promise only when a shared count must be asked. */
  take(charges: readonly Charge[]): Counted | Promise<Counted>;
  /** A limit's state, counting nothing: the headers of an answer refused before anything was counted. */
  peek(charge: Charge): Quota;
  /** Stops its timers. */
  close(): void;
}

export interface LocalRateLimiterOptions {
  /** A clock in milliseconds that never goes backwards; tests step it. Default `performance.now()`. */
  now?: () => number;
  /** How often logs with nothing left in them are dropped. Default a minute. */
  sweepMs?: number;
}

const DEFAULT_SWEEP_MS = 60_000;

/**
 * The count of this process alone: the limit without Redis, and each replica's fallback when
 * Redis cannot be reached. One sliding log per key, and per key and tool; a log is dropped once
 * nothing in it counts, so memory follows the keys in use.
 */
export class LocalRateLimiter implements RateLimiter {
  readonly #now: () => number;
  /** Key id → its own limit's log; keyed by number, so the events path allocates no key. */
  readonly #keys = new Map<number, SlidingLog>();
  /** `<key id> <tool>` → that tool's log for that key. */
  readonly #tools = new Map<string, SlidingLog>();
  readonly #sweep: NodeJS.Timeout;

  constructor(options: LocalRateLimiterOptions = {}) {
    this.#now = options.now ?? (() => performance.now());
    this.#sweep = setInterval(() => this.sweep(), options.sweepMs ?? DEFAULT_SWEEP_MS);
    this.#sweep.unref();
  }

  take(charges: readonly Charge[]): Counted {
    const now = this.#now();
    let refused: Charge | undefined;
    let retryMs = 0;
    for (const charge of charges) {
      const log = this.#logOf(charge);
      if (log.admits(charge.times, charge.rule, now)) continue;
      refused ??= charge;
      // Every charge must pass: the retry is when the last of the refusing ones would.
      retryMs = Math.max(retryMs, log.retryMs(charge.times, charge.rule, now));
    }
    if (refused !== undefined) {
      return { admitted: false, refused, retryAfter: Math.max(1, Math.ceil(retryMs / 1000)), quotas: charges.map((charge) => this.#quota(charge, now)) };
    }
    for (const charge of charges) this.#logOf(charge).add(charge.times, charge.rule, now);
    return { admitted: true, quotas: charges.map((charge) => this.#quota(charge, now)) };
  }

  peek(charge: Charge): Quota {
    return this.#quota(charge, this.#now());
  }

  /** Drops the logs in which nothing counts any more. */
  sweep(): void {
    const now = this.#now();
    for (const [id, log] of this.#keys) if (log.idle(now)) this.#keys.delete(id);
    for (const [id, log] of this.#tools) if (log.idle(now)) this.#tools.delete(id);
  }

  /** Logs held, for tests and the metrics of memory. */
  get size(): number {
    return this.#keys.size + this.#tools.size;
  }

  close(): void {
    clearInterval(this.#sweep);
  }

  #quota(charge: Charge, now: number): Quota {
    const log = this.#existingLog(charge);
    if (log === undefined) return { charge, remaining: charge.rule.requests, resetSeconds: 0 };
    return { charge, remaining: log.remaining(charge.rule, now), resetSeconds: resetSecondsOf(charge.rule, log.resetMs(charge.rule, now)) };
  }

  #existingLog(charge: Charge): SlidingLog | undefined {
    return charge.tool === undefined ? this.#keys.get(charge.keyId) : this.#tools.get(`${charge.keyId} ${charge.tool}`);
  }

  #logOf(charge: Charge): SlidingLog {
    let log = this.#existingLog(charge);
    if (log === undefined) {
      log = new SlidingLog();
      if (charge.tool === undefined) this.#keys.set(charge.keyId, log);
      else this.#tools.set(`${charge.keyId} ${charge.tool}`, log);
    }
    return log;
  }
}
