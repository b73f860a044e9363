import type { RateRule } from '../policy/rate-limits.ts';

/** The longest a lease lasts; shorter for short intervals (a twentieth of one). */
const MAX_LEASE_MS = 1_000;
const LEASE_FRACTION = 20;
/** A lease asks for at most this fraction of a limit, so every replica gets its share. */
const BATCH_FRACTION = 10;
/** Used slots are given back grouped by periods of this fraction of the interval. */
const GROUPS_PER_INTERVAL = 64;

/** How long a lease of `rule` lasts: a twentieth of the interval, a second at most. */
export function leaseMsOf(rule: RateRule): number {
  return Math.min(MAX_LEASE_MS, Math.floor((rule.perSeconds * 1000) / LEASE_FRACTION));
}

/** The period used slots are grouped by when given back (`RETURN`'s groups). */
export function groupMsOf(rule: RateRule): number {
  return Math.max(1, Math.floor((rule.perSeconds * 1000) / GROUPS_PER_INTERVAL));
}

/** What a lease given back says to Redis: its name and the groups of its uses. */
export interface GivenBack {
  readonly member: string;
  /** Flat `[ms after the lease was asked for of the group's last use, count, …]`. */
  readonly uses: readonly number[];
}

/**
 * One subject's lease on this replica (src/redis/shared-rate-limiter.ts), and what the last
 * answer from Redis said of the shared count. Its clock is the monotonic `performance.now()`.
 */
export class Lease {
  /** The count it leases from: `k:<key id>` or `t:<key id>:<tool>`. */
  readonly subject: string;
  /** The limit it leases under; a changed limit has a lease of its own. */
  readonly rule: RateRule;
  /** The lease held, in Redis (`l:…:<granted>`); undefined when none is. */
  member: string | undefined = undefined;
  granted = 0;
  used = 0;
  /** When the lease was asked for, and until when its slots may be used (both `performance.now()`). */
  sent = 0;
  deadline = 0;
  /** The uses, grouped as `RETURN` takes them. */
  uses: number[] = [];
  timer: NodeJS.Timeout | undefined = undefined;
  /** Slots the next lease asks for: doubled when a lease runs out early, cut to what was used when one lapses. */
  want = 1;
  /** Slots that requests waiting for a lease need, so the next one asks for enough. */
  waiting = 0;
  /** The fewest slots one of those requests needs: a lease of fewer serves none of them, and is not granted. */
  least = 1;
  refill: Promise<void> | undefined = undefined;
  /** The shared count's room after the last answer, and when its oldest entry stops counting. */
  sharedLeft = 0;
  resetAt = 0;
  /** Redis granted nothing: requests needing `refusedNeed` slots or more are refused here until `refusedUntil`, telling the client `retryAt`. */
  refusedUntil = 0;
  refusedNeed = 1;
  retryAt = 0;

  constructor(subject: string, rule: RateRule) {
    this.subject = subject;
    this.rule = rule;
  }

  slotsAt(now: number): number {
    return this.member !== undefined && now < this.deadline ? this.granted - this.used : 0;
  }

  /** Takes `times` slots at `now` (there are that many: `slotsAt`). */
  use(times: number, now: number): void {
    this.used += times;
    // Whole milliseconds, rounded up: a use is never stamped before it happened.
    const offset = Math.ceil(now - this.sent);
    const last = this.uses.length - 2;
    const groupMs = groupMsOf(this.rule);
    if (last >= 0 && Math.floor(this.uses[last]! / groupMs) === Math.floor(offset / groupMs)) {
      this.uses[last] = Math.max(this.uses[last]!, offset);
      this.uses[last + 1]! += times;
    } else {
      this.uses.push(offset, times);
    }
  }

  /** Holds a new lease of `granted` slots, asked for at `sent`. */
  hold(member: string, granted: number, sent: number): void {
    this.member = member;
    this.granted = granted;
    this.used = 0;
    this.uses = [];
    this.sent = sent;
    this.deadline = sent + leaseMsOf(this.rule);
    this.refusedUntil = 0;
  }

  /** Ends the lease held: what `RETURN` is told; undefined when none is held. */
  release(): GivenBack | undefined {
    const member = this.member;
    if (member === undefined) return undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    // Used up before it lapsed: the next asks for twice as many; lapsed: for what was used.
    this.want = this.used === this.granted ? Math.min(this.want * 2, this.rule.requests) : Math.max(1, this.used);
    const given = { member, uses: this.uses };
    this.member = undefined;
    this.granted = 0;
    this.used = 0;
    this.uses = [];
    return given;
  }

  /**
   * Slots the next lease asks for: what the waiting requests need at least, else what the last
   * leases showed this replica uses; at most a tenth of the limit, and when the shared count was
   * nearly used up, at most half of what was left, so that no replica hoards the last slots.
   */
  wanted(): number {
    const need = Math.max(1, this.waiting);
    const fair = Math.max(1, Math.floor(this.rule.requests / BATCH_FRACTION));
    const room = Math.max(1, Math.ceil(this.sharedLeft / 2));
    return Math.min(this.rule.requests, Math.max(need, Math.min(this.want, fair, room)));
  }
}
