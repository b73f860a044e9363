import type { Redis } from 'ioredis';
import { LocalRateLimiter, type RateLimiter } from '../limits/rate-limiter.ts';
import { resetSecondsOf, type Charge, type Counted, type Quota, type RateRule } from '../policy/rate-limits.ts';
import { DEFAULT_REDIS_PREFIX } from './identity-tier.ts';
import { groupMsOf, Lease, leaseMsOf } from './rate-lease.ts';
import { LEASE, RETURN } from './rate-lease-scripts.ts';

/** Leases asked for one request before it is refused (each grant serves at least one waiting request). */
const MAX_ROUNDS = 16;
/**
 * A refusal from Redis is answered from memory for at most this fraction of a lease: slots
 * another replica holds unused come back when its lease lapses, sooner than the wait Redis told.
 */
const REFUSAL_MEMORY_FRACTION = 4;

/** Told of what the metrics count: each request counted on this replica's own because Redis could not be reached. */
export interface RateLimitObserver {
  fallback?(): void;
}

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

/**
 * A rate limit counted by every replica together through Redis, exactly (docs/replicas.md,
 * "Rate limits"; docs/adr/0025-rate-limits.md). A replica leases slots from the shared count in
 * batches and admits from its lease with no round trip; a lease's slots count in Redis from
 * the moment they are granted until an interval after the last moment they could have been
 * used, so the replicas together never admit more than the limit in any interval, whatever
 * the concurrency. A lease is given back when it is used up or lapses (a twentieth of the
 * interval, a second at most): its unused slots go back to the others at once, its used ones
 * are stamped with when they were used.
 *
 * Redis down, failing, or silent for the command timeout (down too: docs/replicas.md), the
 * request is counted by this replica's own log at the full limit (`fallback` observed): never
 * a 429 for a limit not reached. A lease that Redis granted after the command gave up on it
 * counts in Redis until it lapses, never here, and is never used.
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
    this.#local = new LocalRateLimiter(options.now === undefined ? {} : { now: options.now });
    this.#sweep = setInterval(() => this.#dropIdle(), 60_000);
    this.#sweep.unref();
  }

  take(charges: readonly Charge[]): Counted | Promise<Counted> {
    if (this.#redis.status !== 'ready') return this.#fallback(charges);
    return this.#fromLeases(charges, performance.now()) ?? this.#afterLeasing(charges);
  }

  /** As this replica knows it: its room at the last answer from Redis, and its lease's slots. */
  peek(charge: Charge): Quota {
    const { requests, perSeconds } = charge.rule;
    const lease = this.#leases.get(`${subjectOf(charge)} ${requests}/${perSeconds}`);
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
    let refused: Charge | undefined;
    let retryAt = 0;
    for (let i = 0; i < charges.length; i++) {
      const lease = leases[i]!;
      if (lease.slotsAt(now) >= charges[i]!.times) continue;
      // A refusal of a larger batch says nothing of a smaller request: that one asks Redis.
      if (lease.refusedUntil <= now || charges[i]!.times < lease.refusedNeed) lacking = true;
      else {
        // Every charge must pass: the retry is when the last of the refusing ones would.
        refused ??= charges[i];
        retryAt = Math.max(retryAt, lease.retryAt);
      }
    }
    if (refused !== undefined) return this.#refused(refused, Math.ceil((retryAt - now) / 1000), charges, now);
    if (lacking) return undefined;
    const quotas = charges.map((charge, i) => {
      const lease = leases[i]!;
      lease.use(charge.times, now);
      const quota = quotaOf(charge, lease, now);
      // Used up: given back at once, so its slots are stamped as early as they can be.
      if (lease.used === lease.granted) this.#giveBack(lease);
      return quota;
    });
    return { admitted: true, quotas };
  }

  /** Leases what is lacking, then counts; again while leases come in and other requests took them first. */
  async #afterLeasing(charges: readonly Charge[]): Promise<Counted> {
    let lacking: Charge[] = [];
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const now = performance.now();
      lacking = charges.filter((charge) => this.#leaseOf(charge).slotsAt(now) < charge.times);
      try {
        await Promise.all(lacking.map((charge) => this.#refill(charge)));
      } catch (error) {
        this.#onError(error);
        return this.#fallback(charges);
      }
      const counted = this.#fromLeases(charges, performance.now());
      if (counted !== undefined) return counted;
    }
    return this.#refused(lacking[0] ?? charges[0]!, 1, charges, performance.now());
  }

  /** One lease asked for at a time per subject; every request lacking it waits for that one. */
  async #refill(charge: Charge): Promise<void> {
    const lease = this.#leaseOf(charge);
    lease.least = lease.refill === undefined ? charge.times : Math.min(lease.least, charge.times);
    lease.waiting += charge.times;
    try {
      // Asked once the requests arriving with this one are waiting too, so that one lease serves them all.
      lease.refill ??= Promise.resolve()
        .then(() => this.#lease(lease))
        .finally(() => (lease.refill = undefined));
      await lease.refill;
    } finally {
      lease.waiting -= charge.times;
    }
  }

  async #lease(lease: Lease): Promise<void> {
    const { rule } = lease;
    const want = lease.wanted();
    const least = lease.least;
    // Its unused slots first: on this one connection, Redis runs the two in order.
    this.#giveBack(lease);
    const name = `l:${this.#replicaId}:${++this.#sequence}`;
    const leaseMs = leaseMsOf(rule);
    // Read before sending: Redis stamps the lease later than this, so it lapses here first.
    const sent = performance.now();
    const answer = (await this.#redis.eval(LEASE, 1, this.#key(lease.subject), rule.requests, rule.perSeconds * 1000, want, leaseMs, name, least)) as number[];
    const [granted, left, waitMs, resetMs] = answer.map(Number) as [number, number, number, number];
    const member = `${name}:${granted}`;
    const now = performance.now();
    lease.sharedLeft = Math.max(0, left);
    lease.resetAt = now + resetMs;
    if (granted === 0) {
      lease.retryAt = now + waitMs;
      lease.refusedUntil = now + Math.min(waitMs, leaseMs / REFUSAL_MEMORY_FRACTION);
      lease.refusedNeed = least;
      return;
    }
    lease.hold(member, granted, sent);
    lease.timer = setTimeout(() => this.#giveBack(lease), Math.max(0, lease.deadline - now));
    lease.timer.unref();
  }

  /** Ends the lease held: unused slots stop counting, used ones count until an interval after their use. */
  #giveBack(lease: Lease): void {
    const given = lease.release();
    if (given !== undefined) this.#return(lease.subject, given.member, given.uses, lease.rule);
  }

  /** `uses`: flat `[ms after the lease was asked for, count, …]` of its used slots; none: all are given back unused. */
  #return(subject: string, member: string, uses: readonly number[], rule: RateRule): void {
    // Not waited for: a lost return only keeps the lease's slots counted until it lapses in Redis.
    this.#redis
      .eval(RETURN, 1, this.#key(subject), member, leaseMsOf(rule), groupMsOf(rule), ...uses)
      .catch((error: unknown) => this.#onError(error));
  }

  #refused(charge: Charge, retryAfter: number, charges: readonly Charge[], now: number): Counted {
    const seconds = Math.max(1, retryAfter);
    const quotas = charges.map((each) => (each === charge ? { charge, remaining: 0, resetSeconds: resetSecondsOf(charge.rule, seconds * 1000) } : quotaOf(each, this.#leaseOf(each), now)));
    return { admitted: false, refused: charge, retryAfter: seconds, quotas };
  }

  #fallback(charges: readonly Charge[]): Counted {
    this.#observe.fallback?.();
    return this.#local.take(charges);
  }

  /**
   * The lease of the charge's subject under the charge's own limit. A changed limit (a PATCH,
   * in force before its answer) has a lease of its own: requests decided under the new limit
   * never use slots leased under the old one, and requests still in flight under the old one
   * do not take the new one's.
   */
  #leaseOf(charge: Charge): Lease {
    const { requests, perSeconds } = charge.rule;
    const id = `${subjectOf(charge)} ${requests}/${perSeconds}`;
    let lease = this.#leases.get(id);
    if (lease === undefined) {
      lease = new Lease(subjectOf(charge), charge.rule);
      this.#leases.set(id, lease);
    }
    return lease;
  }

  /** Leases with none held, none being asked for and no refusal still in force are forgotten (a changed limit's old one too). */
  #dropIdle(): void {
    const now = performance.now();
    for (const [id, lease] of this.#leases) {
      if (lease.member === undefined && lease.refill === undefined && lease.refusedUntil <= now) this.#leases.delete(id);
    }
  }

  #key(subject: string): string {
    return `${this.#prefix}${subject}`;
  }
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
  return { charge, remaining: lease.sharedLeft + lease.slotsAt(now), resetSeconds: resetSecondsOf(charge.rule, lease.resetAt - now) };
}
