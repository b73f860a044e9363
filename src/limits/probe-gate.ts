import { LRUCache } from 'lru-cache';

/**
 * Lets one attempt per subject through per interval, given to one of the claimants (client
 * addresses) that ask for it. A throttle that refuses everything locks the rightful owner out
 * along with the guessers; behind this gate a throttled subject still gets one attempt a second,
 * and the owner, arriving at a moment no guesser can foresee, gets one of the next two
 * (docs/security.md, "Guesses behind a real key's prefix"; docs/adr/0028-probe-gate-newest-address-first.md).
 *
 * The rule, when the slot is free:
 * - **newest first**: it goes to the waiting claimant first seen most recently among those that
 *   never passed. However many addresses flood the subject, one that arrives after them is not
 *   queued behind them: it has the next slot.
 * - **oldest in turn**: unless the previous slot went to the newest already and no claimant is new
 *   since, or the two previous did: then it goes to the waiting claimant that passed least
 *   recently (never first), the one first seen earliest on a tie. So the newest rule cannot be used
 *   by fresh addresses to hold back those waiting: the oldest waiting passes at least every third slot.
 * Any other claimant is refused while the slot is kept for the one whose turn it is (it is back
 * within its `Retry-After`, or stops counting as waiting after `waitMemoryMs`).
 * An interface, so that replicas can share the slot and the line through Redis.
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
/**
 * Addresses remembered per subject (when each was first seen, when it last passed). Past it the
 * least recently active is forgotten; come back, it counts as new. The "thousands of addresses"
 * of the contract fit; an attacker with more can have some of his counted as new again, which the
 * oldest-in-turn slots bound (docs/adr/0028-probe-gate-newest-address-first.md).
 */
export const PROBE_CLAIMANTS_PER_SUBJECT = 4_096;
/** Consecutive slots the newest rule may take; the next goes to the oldest waiting. */
export const PROBE_NEWEST_RUN = 2;
/** A claimant that is not tracked where one must be: no address is known for the request. */
export const UNKNOWN_CLAIMANT = 'unknown';

/** One claimant's place in a subject's line. */
interface Claimant {
  name: string;
  /** When it was first seen (while remembered). */
  firstSeenAt: number;
  /** When it last passed; -Infinity for never. */
  lastPassedAt: number;
  /** Its latest refusal; -Infinity when it has passed since. */
  refusedAt: number;
  /** True while it is in `fresh` or `passed`. */
  inLine: boolean;
}

interface SubjectLine {
  /** When the slot is free again. */
  slotUntil: number;
  /** When the slot was last taken. */
  lastPassAt: number;
  /** Consecutive passes the newest rule gave, up to PROBE_NEWEST_RUN. */
  newestRun: number;
  /** Every remembered claimant, least recently active first. */
  claimants: Map<string, Claimant>;
  /** Refused claimants that never passed, by first sight (then name): the newest is last. */
  fresh: Claimant[];
  /** Refused claimants that passed before, by their last pass (then name). */
  passed: Claimant[];
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

  /** Synchronous: the check and the mark cannot be interleaved by another caller. */
  tryPassSync(subject: string, claimant: string): boolean {
    const now = this.#now();
    const line = this.#line(subject);
    const own = this.#track(line, claimant, now);
    this.#enterLine(line, own);
    if (now < line.slotUntil) {
      own.refusedAt = now;
      return false;
    }
    const [turn, byNewest] = this.#turn(line, own, now);
    if (turn !== own) {
      own.refusedAt = now;
      return false;
    }
    this.#pass(line, own, now, byNewest);
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
    if (passed) {
      this.#pass(line, own, now, own.lastPassedAt === -Infinity && this.#newestTurn(line, own));
      return;
    }
    this.#enterLine(line, own);
    own.refusedAt = now;
  }

  #line(subject: string): SubjectLine {
    let line = this.#lines.get(subject);
    if (line === undefined) {
      line = { slotUntil: -Infinity, lastPassAt: -Infinity, newestRun: 0, claimants: new Map(), fresh: [], passed: [] };
      this.#lines.set(subject, line);
    }
    return line;
  }

  /** Whose turn the free slot is, and whether the newest rule gave it. `own` is in line and asking. */
  #turn(line: SubjectLine, own: Claimant, now: number): [Claimant, boolean] {
    const live = (claimant: Claimant) => claimant === own || now - claimant.refusedAt < this.#waitMemoryMs;
    const newest = this.#liveEnd(line.fresh, live, 'newest');
    if (newest !== undefined && this.#newestTurn(line, newest)) return [newest, true];
    return [this.#liveEnd(line.fresh, live, 'oldest') ?? this.#liveEnd(line.passed, live, 'oldest') ?? own, false];
  }

  /** The newest rule's turn: after a slot of the oldest, or once more for a claimant new since the last pass. */
  #newestTurn(line: SubjectLine, newest: Claimant): boolean {
    if (line.newestRun === 0) return true;
    return line.newestRun < PROBE_NEWEST_RUN && newest.firstSeenAt > line.lastPassAt;
  }

  /** The live claimant at one end of a line; those found lapsed there leave the line. */
  #liveEnd(queue: Claimant[], live: (claimant: Claimant) => boolean, end: 'newest' | 'oldest'): Claimant | undefined {
    while (queue.length > 0) {
      const candidate = end === 'newest' ? queue.at(-1)! : queue[0]!;
      if (live(candidate)) return candidate;
      if (end === 'newest') queue.pop();
      else queue.shift();
      candidate.inLine = false;
    }
    return undefined;
  }

  #pass(line: SubjectLine, own: Claimant, now: number, byNewest: boolean): void {
    line.slotUntil = now + this.#intervalMs;
    line.lastPassAt = now;
    line.newestRun = byNewest ? line.newestRun + 1 : 0;
    this.#leaveLine(line, own);
    own.lastPassedAt = now;
    own.refusedAt = -Infinity;
  }

  /** Puts a claimant in its line, in order: `fresh` by first sight, `passed` by last pass. */
  #enterLine(line: SubjectLine, own: Claimant): void {
    if (own.inLine) return;
    const neverPassed = own.lastPassedAt === -Infinity;
    const queue = neverPassed ? line.fresh : line.passed;
    const key = (claimant: Claimant) => (neverPassed ? claimant.firstSeenAt : claimant.lastPassedAt);
    const before = (claimant: Claimant) => key(claimant) < key(own) || (key(claimant) === key(own) && claimant.name < own.name);
    // Binary search: most claimants join at the end (they are the newest), so this is cheap.
    let low = 0;
    let high = queue.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (before(queue[middle]!)) low = middle + 1;
      else high = middle;
    }
    queue.splice(low, 0, own);
    own.inLine = true;
  }

  #leaveLine(line: SubjectLine, own: Claimant): void {
    if (!own.inLine) return;
    const queue = own.lastPassedAt === -Infinity ? line.fresh : line.passed;
    const at = queue.indexOf(own);
    if (at >= 0) queue.splice(at, 1);
    own.inLine = false;
  }

  /** The claimant's entry, moved to the most recently active; made room for (the least recently active forgotten) if new. */
  #track(line: SubjectLine, name: string, now: number): Claimant {
    const known = line.claimants.get(name);
    if (known !== undefined) {
      line.claimants.delete(name);
      line.claimants.set(name, known);
      return known;
    }
    if (line.claimants.size >= this.#maxClaimants) {
      const [idle, claimant] = line.claimants.entries().next().value!;
      this.#leaveLine(line, claimant);
      line.claimants.delete(idle);
    }
    const claimant: Claimant = { name, firstSeenAt: now, lastPassedAt: -Infinity, refusedAt: -Infinity, inLine: false };
    line.claimants.set(name, claimant);
    return claimant;
  }
}
