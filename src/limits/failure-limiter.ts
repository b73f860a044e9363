import { LRUCache } from 'lru-cache';

/**
 * Counts failures per subject (an email, a client address, a key prefix) in a fixed window
 * that opens at the first failure. Past `limit` failures the subject is blocked until the
 * window closes. An interface, so that replicas can share the counts through Redis.
 */
export interface FailureLimiter {
  /** Seconds until the subject may try again, or 0 when it is not blocked. */
  blockedFor(subject: string): Promise<number>;
  recordFailure(subject: string): Promise<void>;
  /**
   * Counts one failure for every subject at once, before the attempt is checked, unless one of
   * them is already at the limit: then nothing is counted and the answer is the seconds to wait.
   * Check-and-count is one step, so a burst cannot all pass a check made before any is counted.
   * 0 means reserved: the caller checks the attempt, then `release`s what turned out not to fail.
   */
  reserve(subjects: readonly string[]): Promise<number>;
  /** Gives back one reserved failure (the attempt succeeded, or was never checked). */
  release(subject: string): Promise<void>;
}

export interface FailureLimiterOptions {
  limit: number;
  windowMs: number;
  /** Subjects tracked at most; the least recently touched are forgotten first. */
  maxSubjects?: number;
  now?: () => number;
}

interface Window {
  failures: number;
  closesAt: number;
}

export class MemoryFailureLimiter implements FailureLimiter {
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #windows: LRUCache<string, Window>;

  constructor(options: FailureLimiterOptions) {
    this.#limit = options.limit;
    this.#windowMs = options.windowMs;
    this.#now = options.now ?? Date.now;
    // Bounded by `maxSize` counting one per subject, not by `max`: with `max` lru-cache
    // allocates its tables for every subject up front (~2.8 MB for 100,000), memory that each
    // limiter, mostly idle, would hold from start.
    this.#windows = new LRUCache({ maxSize: options.maxSubjects ?? 100_000, sizeCalculation: () => 1 });
  }

  blockedFor(subject: string): Promise<number> {
    return Promise.resolve(this.blockedForSync(subject));
  }

  /** Synchronous form, for the request path where no shared tier is configured. */
  blockedForSync(subject: string): number {
    const window = this.#current(subject);
    if (!window || window.failures < this.#limit) return 0;
    return Math.ceil((window.closesAt - this.#now()) / 1000);
  }

  recordFailure(subject: string): Promise<void> {
    this.#count(subject);
    return Promise.resolve();
  }

  reserve(subjects: readonly string[]): Promise<number> {
    return Promise.resolve(this.reserveSync(subjects));
  }

  /** Synchronous form: no await between the check and the count, so concurrent callers cannot interleave. */
  reserveSync(subjects: readonly string[]): number {
    const waits = subjects.map((subject) => this.blockedForSync(subject));
    const wait = Math.max(0, ...waits);
    if (wait > 0) return wait;
    for (const subject of subjects) this.#count(subject);
    return 0;
  }

  release(subject: string): Promise<void> {
    const window = this.#current(subject);
    if (window !== undefined) {
      if (window.failures <= 1) this.#windows.delete(subject);
      else window.failures--;
    }
    return Promise.resolve();
  }

  #count(subject: string): void {
    const window = this.#current(subject);
    if (window) window.failures++;
    else this.#windows.set(subject, { failures: 1, closesAt: this.#now() + this.#windowMs });
  }

  #current(subject: string): Window | undefined {
    const window = this.#windows.get(subject);
    if (window && window.closesAt <= this.#now()) {
      this.#windows.delete(subject);
      return undefined;
    }
    return window;
  }
}
