import type { RateRule } from '../policy/rate-limits.ts';

/**
 * Groups one interval is divided into: a log holds at most about this many entries, whatever
 * the limit, and admits at least 64/65 of what an exact log of every request would.
 */
const GROUPS_PER_INTERVAL = 64;

/**
 * The requests one subject was admitted, as a sliding log (docs/adr/0025-rate-limits.md): a
 * request is admitted at `now` only when the interval of `perSeconds` ending at `now` would
 * then hold at most `requests`, so no interval of that length ever holds more — no fixed
 * window, no burst.
 *
 * Admissions close in time share one entry, stamped with the latest of them: an entry counts
 * until its stamp is more than `perSeconds` old, so each request counts at least as long as it
 * should, never less. The log is exact in what it admits (never more than the limit in any
 * interval) and small (about 65 entries), at the price of admitting up to 1/64 less than a log
 * of every request would under a steady overload. The clock must not go backwards.
 */
export class SlidingLog {
  /** When each entry began (for grouping), its stamp (the latest admission in it) and its count; a queue from `#head`. */
  readonly #starts: number[] = [];
  readonly #stamps: number[] = [];
  readonly #counts: number[] = [];
  #head = 0;
  #total = 0;
  /** The interval of the last rule used, to tell when the log is empty without one. */
  #lastPerMs = 0;

  /** Whether `times` more requests at `now` stay within the rule. */
  admits(times: number, rule: RateRule, now: number): boolean {
    this.#expire(rule.perSeconds * 1000, now);
    return this.#total + times <= rule.requests;
  }

  /** Counts `times` requests admitted at `now` (after `admits` said yes). */
  add(times: number, rule: RateRule, now: number): void {
    const perMs = rule.perSeconds * 1000;
    this.#lastPerMs = perMs;
    const last = this.#stamps.length - 1;
    if (last >= this.#head && now - this.#starts[last]! < Math.max(1, perMs / GROUPS_PER_INTERVAL)) {
      this.#stamps[last] = Math.max(this.#stamps[last]!, now);
      this.#counts[last]! += times;
    } else {
      this.#starts.push(now);
      this.#stamps.push(now);
      this.#counts.push(times);
    }
    this.#total += times;
  }

  /** Requests still admitted in the interval ending at `now`. */
  remaining(rule: RateRule, now: number): number {
    this.#expire(rule.perSeconds * 1000, now);
    return Math.max(0, rule.requests - this.#total);
  }

  /** Milliseconds until the oldest entry stops counting (`remaining` grows), at most the interval; 0 when none counts. */
  resetMs(rule: RateRule, now: number): number {
    const perMs = rule.perSeconds * 1000;
    this.#expire(perMs, now);
    return this.#total === 0 ? 0 : untilExpiry(this.#stamps[this.#head]!, perMs, now);
  }

  /** Milliseconds until `times` more would be admitted. */
  retryMs(times: number, rule: RateRule, now: number): number {
    const perMs = rule.perSeconds * 1000;
    this.#expire(perMs, now);
    let excess = this.#total + times - rule.requests;
    if (excess <= 0) return 0;
    for (let index = this.#head; index < this.#stamps.length; index++) {
      excess -= this.#counts[index]!;
      if (excess <= 0) return untilExpiry(this.#stamps[index]!, perMs, now);
    }
    // More than the rule allows at all (it was lowered): a whole interval from the newest.
    return this.#stamps.length > this.#head ? untilExpiry(this.#stamps[this.#stamps.length - 1]!, perMs, now) : perMs;
  }

  /** Entries held (each a group of requests). */
  get size(): number {
    return this.#stamps.length - this.#head;
  }

  /** Nothing counts any more under the last rule used: the log can be dropped. */
  idle(now: number): boolean {
    this.#expire(this.#lastPerMs, now);
    return this.#total === 0;
  }

  /** An entry stops counting once its stamp is more than an interval old. */
  #expire(perMs: number, now: number): void {
    const oldest = now - perMs;
    while (this.#head < this.#stamps.length && this.#stamps[this.#head]! < oldest) {
      this.#total -= this.#counts[this.#head]!;
      this.#head++;
    }
    if (this.#head > 32 && this.#head * 2 > this.#stamps.length) {
      this.#starts.splice(0, this.#head);
      this.#stamps.splice(0, this.#head);
      this.#counts.splice(0, this.#head);
      this.#head = 0;
    }
  }
}

/**
 * When an entry stamped `stamp` stops counting, in milliseconds from `now` (never after it):
 * `perMs - (now - stamp)`, never `stamp + perMs - now`. The clock is fractional
 * (`performance.now()`), and rounding the sum can land above `perMs` for an entry stamped
 * `now` (60000.000000007 ms, told as `t=61` on a 60 s limit); an age of zero or more taken
 * from `perMs` cannot.
 */
function untilExpiry(stamp: number, perMs: number, now: number): number {
  return perMs - (now - stamp);
}
