import type { Redis } from 'ioredis';
import { LocalRateLimiter, type RateLimiter, type RateLimitObserver } from '../limits/rate-limiter.ts';
import type { Charge, Counted, Quota, RateRule } from '../policy/rate-limits.ts';
import { DEFAULT_REDIS_PREFIX } from './identity-tier.ts';
import { isLateAnswer } from './late-answer.ts';
import { LEASE, RETURN } from './rate-lease-scripts.ts';

/** The longest a lease lasts; shorter for short intervals (a twentieth of one). */
const MAX_LEASE_MS = 1_000;
const LEASE_FRACTION = 20;
/** A replica leases at most this fraction of a limit at once, so every replica gets its share. */
const BATCH_FRACTION = 10;
/** Returned slots are grouped by periods of this fraction of the interval (a bounded number of entries). */
const GROUPS_PER_INTERVAL = 64;
/** Leases asked for one request before it is refused (each grant serves at least one waiting request). */
const MAX_ROUNDS = 16;
/** The most slots one lease asks for (a tenth of the largest limit). */
const MAX_WANT = 100_000;
/** Retry-After when Redis answered too late to know whether it granted anything. */
const LATE_ANSWER_RETRY_S = 1;

export interface SharedRateLimiterOptions {
  redis: Redis;
  /** This replica, in the lease names (for an operator reading Redis). */
  replicaId: string;
  prefix?: string;
  observe?: RateLimitObserver;
  /** The clock of the fallback's logs; the leases' own deadlines are read from `performance.now()`. */
  now?: () => number;
  /** Told of a Redis failure that sent the count to this replica's own. */
  onError?: (error: unknown) => void;
}

/** A subject's lease on this replica, and what the last answer from Redis said. */
class Lease {
  /** The current lease's member in Redis; undefined when none is held. */
  member: string | undefined = undefined;
  granted = 0;
  used = 0;
  /** `performance.now()` until which its slots may be used. */
  deadline = 0;
  timer: NodeJS.Timeout | undefined = undefined;
  /** Slots asked for next time: doubled when a lease runs out early, cut to what was used when it lapses. */
  want = 1;
  /** Requests waiting for a lease, so the next one asks for enough. */
  waiting = 0;
  refill: Promise<void> | undefined = undefined;
  /** The shared count's room after the last grant, and when its oldest entry stops counting. */
  sharedLeft = 0;
  resetAt = 0;
  /** Redis granted nothing: refused here until then, at the latest until `retryAt`. */
  refusedUntil = 0;
  retryAt = 0;
  rule: RateRule;
  readonly subject: string;

  constructor(subject: string, rule: RateRule) {
    this.subject = subject;
    this.rule = rule;
  }

  slotsAt(now: number): number {
    return this.member !== undefined && now < this.deadline ? this.granted - this.used : 0;
  }
}

/**
 * A rate limit counted by every replica together through Redis, exactly (docs/replicas.md,
 * "Rate limits"; docs/adr/0025-rate-limits.md). A replica leases slots from the shared count in
 * batches and admits from its lease with no round trip; a lease's slots count in Redis from
 * the moment they are granted until an interval after the last moment they could have been
 * used, so the replicas together never admit more than the limit in any interval, whatever
 * the concurrency. Slots a replica does not use are given back when its lease lapses (a
 * twentieth of the interval, a second at most), so the others can have them.
 *
 * Redis not connected, or failing: the request is counted by this replica's own log at the
 * full limit (`fallback` observed). Redis answering too late to know whether it granted: the
 * request is refused (`Retry-After: 1`), never counted twice.
 */
export class SharedRateLimiter implements RateLimiter {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #replicaId: string;
  readonly #local: LocalRateLimiter;
  readonly #observe: RateLimitObserver;
  readonly #onError: (error: unknown) => void;
  readonly #leases = new Map<string, Lease>();
  readonly #sweep: NodeJS.Timeout;
  #sequence = 0;

  constructor(options: SharedRateLimiterOptions) {
    this.#redis = options.redis;
    this.#prefix = `${options.prefix ?? DEFAULT_REDIS_PREFIX}rate:`;
    this.#replicaId = options.replicaId;
    this.#observe = options.observe ?? {};
    this.#onError = options.onError ?? (() => {});
    this.#local = new LocalRateLimiter({ ...(options.now === undefined ? {} : { now: options.now }), observe: this.#observe });
    this.#sweep = setInterval(() => this.#dropIdle(), 60_000);
    this.#sweep.unref();
  }

  take(charges: readonly Charge[]): Counted | Promise<Counted> {
    if (this.#redis.status !== 'ready') return this.#fallback(charges);
    return this.#fromLeases(charges, performance.now()) ?? this.#afterLeasing(charges);
  }

  peek(charge: Charge): Quota {
    const lease = this.#leases.get(subjectOf(charge));
    if (lease === undefined || this.#redis.status !== 'ready') return this.#local.peek(charge);
    return quotaOf(charge, lease, performance.now());
  }

  close(): void {
    clearInterval(this.#sweep);
    this.#local.close();
    for (const lease of this.#leases.values()) this.#giveBack(lease);
  }

  /** Counted from the leases held, with no round trip; undefined when a lease must be asked for first. */
  #fromLeases(charges: readonly Charge[], now: number): Counted | undefined {
    const leases = charges.map((charge) => this.#leaseOf(charge));
    let lacking = false;
    for (let i = 0; i < charges.length; i++) {
      const lease = leases[i]!;
      if (lease.slotsAt(now) >= charges[i]!.times) continue;
      if (lease.refusedUntil > now) return this.#refused(charges[i]!, Math.ceil((lease.retryAt - now) / 1000), charges, now);
      lacking = true;
    }
    if (lacking) return undefined;
    const quotas = charges.map((charge, i) => {
      const lease = leases[i]!;
      lease.used += charge.times;
      const quota = quotaOf(charge, lease, now);
      // Used up: given back at once, stamped now, so its slots stop counting as early as they can.
      if (lease.used === lease.granted) this.#giveBack(lease);
      return quota;
    });
    return { admitted: true, quotas };
  }

  /** Leases what is lacking, then counts; again while leases come in and other requests took them first. */
  async #afterLeasing(charges: readonly Charge[]): Promise<Counted> {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const now = performance.now();
      const lacking = charges.filter((charge) => this.#leaseOf(charge).slotsAt(now) < charge.times);
      try {
        await Promise.all(lacking.map((charge) => this.#refill(charge)));
      } catch (error) {
        this.#onError(error);
        if (isLateAnswer(error)) return this.#refused(lacking[0]!, LATE_ANSWER_RETRY_S, charges, performance.now());
        return this.#fallback(charges);
      }
      const counted = this.#fromLeases(charges, performance.now());
      if (counted !== undefined) return counted;
    }
    return this.#refused(charges[0]!, 1, charges, performance.now());
  }

  /** One lease asked for at a time per subject; every request lacking it waits for that one. */
  async #refill(charge: Charge): Promise<void> {
    const lease = this.#leaseOf(charge);
    lease.waiting += charge.times;
    try {
      lease.refill ??= this.#lease(lease, charge.rule).finally(() => (lease.refill = undefined));
      await lease.refill;
    } finally {
      lease.waiting -= charge.times;
    }
  }

  async #lease(lease: Lease, rule: RateRule): Promise<void> {
    const { subject } = lease;
    // Its unused slots first: on this one connection, Redis runs the two in order.
    this.#giveBack(lease);
    const member = `l:${this.#replicaId}:${++this.#sequence}`;
    const leaseMs = leaseMsOf(rule);
    const want = Math.min(Math.max(1, Math.floor(rule.requests / BATCH_FRACTION)), Math.max(lease.want, lease.waiting));
    // Read before sending: Redis stamps the lease later than this, so it lapses here first.
    const sent = performance.now();
    let answer: number[];
    try {
      answer = (await this.#redis.eval(LEASE, 2, ...this.#keys(subject), rule.requests, rule.perSeconds * 1000, want, leaseMs, member)) as number[];
    } catch (error) {
      // Too late to know whether it was granted: whatever was granted is given back.
      if (isLateAnswer(error)) this.#return(subject, member, 0, rule);
      throw error;
    }
    const [granted, left, waitMs, resetMs] = answer.map(Number) as [number, number, number, number];
    const now = performance.now();
    lease.rule = rule;
    lease.sharedLeft = Math.max(0, left);
    lease.resetAt = now + resetMs;
    if (granted === 0) {
      lease.retryAt = now + waitMs;
      lease.refusedUntil = now + Math.min(waitMs, leaseMs);
      return;
    }
    lease.refusedUntil = 0;
    lease.member = member;
    lease.granted = granted;
    lease.used = 0;
    lease.deadline = sent + leaseMs;
    lease.timer = setTimeout(() => this.#giveBack(lease), Math.max(0, lease.deadline - now));
    lease.timer.unref();
  }

  /** Ends the lease held: unused slots stop counting, used ones count until an interval after now. */
  #giveBack(lease: Lease): void {
    const member = lease.member;
    if (member === undefined) return;
    clearTimeout(lease.timer);
    lease.want = lease.used === lease.granted ? Math.min(lease.want * 2, MAX_WANT) : Math.max(1, lease.used);
    const used = lease.used;
    lease.member = undefined;
    lease.granted = 0;
    lease.used = 0;
    this.#return(lease.subject, member, used, lease.rule);
  }

  #return(subject: string, member: string, used: number, rule: RateRule): void {
    const groupMs = Math.max(1, Math.floor((rule.perSeconds * 1000) / GROUPS_PER_INTERVAL));
    // Not waited for: a lost return only keeps the lease's slots counted until it lapses in Redis.
    this.#redis.eval(RETURN, 2, ...this.#keys(subject), member, used, groupMs).catch((error: unknown) => this.#onError(error));
  }

  #refused(charge: Charge, retryAfter: number, charges: readonly Charge[], now: number): Counted {
    this.#observe.refused?.(charge.limit);
    const quotas = charges.map((each) =>
      each === charge ? { charge, remaining: 0, resetSeconds: Math.min(charge.rule.perSeconds, Math.max(1, retryAfter)) } : quotaOf(each, this.#leaseOf(each), now),
    );
    return { admitted: false, refused: charge, retryAfter: Math.max(1, retryAfter), quotas };
  }

  #fallback(charges: readonly Charge[]): Counted {
    this.#observe.fallback?.();
    return this.#local.take(charges);
  }

  #leaseOf(charge: Charge): Lease {
    const subject = subjectOf(charge);
    let lease = this.#leases.get(subject);
    if (lease === undefined) {
      lease = new Lease(subject, charge.rule);
      this.#leases.set(subject, lease);
    } else if (lease.rule.requests !== charge.rule.requests || lease.rule.perSeconds !== charge.rule.perSeconds) {
      // The limit changed (a PATCH, in force before its answer): what was leased or refused under the old one is not used.
      this.#giveBack(lease);
      lease.rule = charge.rule;
      lease.refusedUntil = 0;
      lease.want = 1;
    }
    return lease;
  }

  /** Subjects with no lease held, none being asked for and no refusal still in force are forgotten. */
  #dropIdle(): void {
    const now = performance.now();
    for (const [subject, lease] of this.#leases) {
      if (lease.member === undefined && lease.refill === undefined && lease.refusedUntil <= now) this.#leases.delete(subject);
    }
  }

  #keys(subject: string): [string, string] {
    return [`${this.#prefix}${subject}:z`, `${this.#prefix}${subject}:h`];
  }
}

/** A lease lasts a twentieth of the interval, a second at most. */
function leaseMsOf(rule: RateRule): number {
  return Math.min(MAX_LEASE_MS, Math.floor((rule.perSeconds * 1000) / LEASE_FRACTION));
}

function subjectOf(charge: Charge): string {
  return charge.tool === undefined ? `k:${charge.keyId}` : `t:${charge.keyId}:${charge.tool}`;
}

/**
 * What this replica knows of the shared count: its room at the last grant, and the slots of its
 * lease left. A lease counts until an interval after it lapses, so the reset read from Redis can
 * pass the interval by up to a lease's length: it is told as the interval at most.
 */
function quotaOf(charge: Charge, lease: Lease, now: number): Quota {
  const resetSeconds = Math.min(charge.rule.perSeconds, Math.max(0, Math.ceil((lease.resetAt - now) / 1000)));
  return { charge, remaining: lease.sharedLeft + lease.slotsAt(now), resetSeconds };
}
