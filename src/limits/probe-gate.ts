import { LRUCache } from 'lru-cache';

/**
 * Lets one attempt per subject through per interval, taken in turns by the claimants (client
 * addresses) that ask for it. A throttle that refuses everything locks the rightful owner out
 * along with the guessers; behind this gate a throttled subject still gets one attempt a second.
 * First come, first served would give that one attempt to whoever asks most often, so under a
 * sustained flood the owner would never get it (docs/security.md, "Guesses behind a real key's
 * prefix"): the turn goes to the waiting claimant that passed least recently.
 * An interface, so that replicas can share the interval through Redis.
 */
export interface ProbeGate {
  /** True when `claimant` may go ahead: the subject's slot is free and the turn is its own. */
  tryPass(subject: string, claimant: string): Promise<boolean>;
}

export interface ProbeGateOptions {
  intervalMs: number;
  /** How long a refused claimant keeps its place in line without asking again; default PROBE_WAIT_MEMORY_MS. */
  waitMemoryMs?: number;
  /** Claimants remembered per subject; default PROBE_CLAIMANTS_PER_SUBJECT. */
  maxClaimants?: number;
  /** Subjects remembered at most; the least recently asked are forgotten first. */
  maxSubjects?: number;
  now?: () => number;
}

export const DEFAULT_PROBE_SUBJECTS = 10_000;
/**
 * A refused client is told `Retry-After: 1`; remembering it as waiting for 3 s covers its
 * return with room for a slow client, and a claimant that gave up stops holding the slot back.
 */
export const PROBE_WAIT_MEMORY_MS = 3_000;
/** Addresses kept in line per subject: the gate is fair across this many, no more (docs/security.md). */
export const PROBE_CLAIMANTS_PER_SUBJECT = 64;
/** A claimant that is not tracked where one must be: no address is known for the request. */
export const UNKNOWN_CLAIMANT = 'unknown';

/** One claimant's place in a subject's line. */
interface Claimant {
  /** When it last passed; -Infinity for never. */
  lastPassedAt: number;
  /** When its current wait began; undefined when it has passed since its last refusal. */
  waitingSince: number | undefined;
  /** Its latest refusal. */
  refusedAt: number;
}

interface SubjectLine {
  /** When the slot is free again. */
  slotUntil: number;
  claimants: Map<string, Claimant>;
}

export class MemoryProbeGate implements ProbeGate {
  readonly #intervalMs: number;
  readonly #waitMemoryMs: number;
  readonly #maxClaimants: number;
  readonly #now: () => number;
  readonly #lines: LRUCache<string, SubjectLine>;

  constructor(options: ProbeGateOptions) {
    this.#intervalMs = options.intervalMs;
    this.#waitMemoryMs = options.waitMemoryMs ?? PROBE_WAIT_MEMORY_MS;
    this.#maxClaimants = options.maxClaimants ?? PROBE_CLAIMANTS_PER_SUBJECT;
    this.#now = options.now ?? Date.now;
    // maxSize, not max: lru-cache would allocate its tables for `max` entries up front.
    this.#lines = new LRUCache({ maxSize: options.maxSubjects ?? DEFAULT_PROBE_SUBJECTS, sizeCalculation: () => 1 });
  }

  tryPass(subject: string, claimant: string): Promise<boolean> {
    return Promise.resolve(this.tryPassSync(subject, claimant));
  }

  /**
   * Synchronous: the check and the mark cannot be interleaved by another caller. The slot taken:
   * refused, and the caller waits. The slot free: the turn belongs to the waiting claimant (or
   * the caller) that passed least recently, never first, the longest waiting on a tie; if that is
   * another, the caller is refused and the slot left free for it (it is back within its
   * `Retry-After`, or stops counting as waiting after `waitMemoryMs`).
   */
  tryPassSync(subject: string, claimant: string): boolean {
    const now = this.#now();
    const line = this.#line(subject);
    const own = this.#track(line, claimant, now);
    if (own === undefined) return false;
    if (now < line.slotUntil || !this.#hasTurn(line, claimant, own, now)) {
      this.#refuse(own, now);
      return false;
    }
    this.#pass(line, own, now);
    return true;
  }

  /**
   * Takes a decision made elsewhere (the shared gate) into this line, so that this gate can
   * decide alone, fairly and within the interval, the moment the shared one cannot answer.
   */
  record(subject: string, claimant: string, passed: boolean): void {
    const now = this.#now();
    const line = this.#line(subject);
    const own = this.#track(line, claimant, now);
    if (own === undefined) return;
    if (passed) this.#pass(line, own, now);
    else this.#refuse(own, now);
  }

  #line(subject: string): SubjectLine {
    let line = this.#lines.get(subject);
    if (line === undefined) {
      line = { slotUntil: -Infinity, claimants: new Map() };
      this.#lines.set(subject, line);
    }
    return line;
  }

  #pass(line: SubjectLine, own: Claimant, now: number): void {
    line.slotUntil = now + this.#intervalMs;
    own.lastPassedAt = now;
    own.waitingSince = undefined;
  }

  #refuse(own: Claimant, now: number): void {
    // A wait that lapsed was given up: a new one begins at the back.
    if (!this.#waiting(own, now)) own.waitingSince = now;
    own.refusedAt = now;
  }

  #waiting(claimant: Claimant, now: number): boolean {
    return claimant.waitingSince !== undefined && now - claimant.refusedAt < this.#waitMemoryMs;
  }

  #hasTurn(line: SubjectLine, name: string, own: Claimant, now: number): boolean {
    const ownSince = this.#waiting(own, now) ? own.waitingSince! : now;
    for (const [other, claimant] of line.claimants) {
      if (other === name || !this.#waiting(claimant, now)) continue;
      if (claimant.lastPassedAt < own.lastPassedAt) return false;
      if (claimant.lastPassedAt === own.lastPassedAt && claimant.waitingSince! < ownSince) return false;
    }
    return true;
  }

  /** The claimant's entry, made room for if new; undefined when every tracked claimant is waiting. */
  #track(line: SubjectLine, name: string, now: number): Claimant | undefined {
    const known = line.claimants.get(name);
    if (known !== undefined) return known;
    if (line.claimants.size >= this.#maxClaimants && !this.#evictOne(line, now)) return undefined;
    const claimant: Claimant = { lastPassedAt: -Infinity, waitingSince: undefined, refusedAt: -Infinity };
    line.claimants.set(name, claimant);
    return claimant;
  }

  /** Forgets one claimant that is not waiting: an idle one first, else the one that passed most recently. */
  #evictOne(line: SubjectLine, now: number): boolean {
    let victim: string | undefined;
    let victimPassedAt = -Infinity;
    for (const [name, claimant] of line.claimants) {
      if (this.#waiting(claimant, now)) continue;
      if (now - claimant.lastPassedAt >= this.#waitMemoryMs) {
        line.claimants.delete(name);
        return true;
      }
      if (victim === undefined || claimant.lastPassedAt > victimPassedAt) [victim, victimPassedAt] = [name, claimant.lastPassedAt];
    }
    if (victim === undefined) return false;
    line.claimants.delete(victim);
    return true;
  }
}
