import { LRUCache } from 'lru-cache';

/**
 * Lets one attempt per subject through per interval. A throttle that refuses everything locks
 * the rightful owner out along with the guessers; behind this gate a throttled subject still
 * gets one attempt a second, so the owner gets in soon while guesses stay bounded by the clock.
 * An interface, so that replicas can share the interval through Redis.
 */
export interface ProbeGate {
  /** True when the caller may go ahead: no other attempt on the subject passed within the interval. */
  tryPass(subject: string): Promise<boolean>;
}

export interface ProbeGateOptions {
  intervalMs: number;
  /** Subjects remembered at most; the least recently passed are forgotten first. */
  maxSubjects?: number;
  now?: () => number;
}

export const DEFAULT_PROBE_SUBJECTS = 10_000;

export class MemoryProbeGate implements ProbeGate {
  readonly #intervalMs: number;
  readonly #now: () => number;
  /** Subject → when its last attempt passed. */
  readonly #passedAt: LRUCache<string, number>;

  constructor(options: ProbeGateOptions) {
    this.#intervalMs = options.intervalMs;
    this.#now = options.now ?? Date.now;
    // maxSize, not max: lru-cache would allocate its tables for `max` entries up front.
    this.#passedAt = new LRUCache({ maxSize: options.maxSubjects ?? DEFAULT_PROBE_SUBJECTS, sizeCalculation: () => 1 });
  }

  tryPass(subject: string): Promise<boolean> {
    return Promise.resolve(this.tryPassSync(subject));
  }

  /** Synchronous: the check and the mark cannot be interleaved by another caller. */
  tryPassSync(subject: string): boolean {
    const now = this.#now();
    const passedAt = this.#passedAt.get(subject);
    if (passedAt !== undefined && now - passedAt < this.#intervalMs) return false;
    this.#passedAt.set(subject, now);
    return true;
  }

  /** Undoes a pass that did not happen after all (the shared gate said no). */
  forget(subject: string): void {
    this.#passedAt.delete(subject);
  }
}
