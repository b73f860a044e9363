import { hash, verify } from '@node-rs/argon2';
import type { Argon2Params } from './argon2-params.ts';

export interface Argon2Options extends Argon2Params {
  /** At most this many hashes or verifies run at once, so argon2 never starves the event loop's thread pool. */
  concurrency: number;
  /** Login-lane jobs allowed to wait for a slot; more are refused at once. Default DEFAULT_LOGIN_QUEUE_LIMIT. */
  loginQueueLimit?: number;
}

/**
 * Login-lane jobs that may wait. Each slot frees in one verify's time (~10–20 ms at the default
 * cost), so 32 waiting behind ARGON2_CONCURRENCY = 2 slots is a wait of a few hundred ms at
 * most: past that a login answers 429 at once instead of holding its connection in a queue.
 */
export const DEFAULT_LOGIN_QUEUE_LIMIT = 32;

/** The login lane's queue was full: no work was done. */
export const ARGON2_BUSY = 'busy';
export type Argon2Busy = typeof ARGON2_BUSY;

/** Counters since start, for metrics. */
export interface Argon2Stats {
  /** Every verify, either lane. */
  verifies: number;
  /** Verifies on the login lane (admin passwords, the decoy for unknown emails). */
  loginVerifies: number;
  /** Login-lane jobs refused because its queue was full. */
  loginRefusals: number;
}

/**
 * argon2id hashing for admin passwords and API keys. Concurrency is capped: a storm of
 * cold keys or failed logins queues here instead of taking every libuv thread.
 *
 * Two lanes share the slots. The key lane (API-key verifies, key creation) is served first: an
 * API key's first use must never wait behind a burst of admin logins, which anyone can send.
 * The login lane waits only when no key work does, and its queue is bounded: past
 * `loginQueueLimit` a login job is refused at once (`ARGON2_BUSY`) rather than queued.
 */
export class Argon2Hasher {
  readonly #options: Argon2Options;
  readonly #loginQueueLimit: number;
  #running = 0;
  readonly #keyWaiting: Array<() => void> = [];
  readonly #loginWaiting: Array<() => void> = [];
  readonly #stats: Argon2Stats = { verifies: 0, loginVerifies: 0, loginRefusals: 0 };

  constructor(options: Argon2Options) {
    this.#options = options;
    this.#loginQueueLimit = options.loginQueueLimit ?? DEFAULT_LOGIN_QUEUE_LIMIT;
  }

  /** Verifies performed since start (for the benchmark's "argon2 calls per key"). */
  get verifyCount(): number {
    return this.#stats.verifies;
  }

  /** The parameters new hashes get. */
  get params(): Argon2Params {
    const { memoryKiB, timeCost, parallelism } = this.#options;
    return { memoryKiB, timeCost, parallelism };
  }

  stats(): Argon2Stats {
    return { ...this.#stats };
  }

  /** Key lane. */
  hash(secret: string): Promise<string> {
    return this.#onKeyLane(() => hashWith(secret, this.params));
  }

  /** Key lane. False for a mismatch and for a hash string that cannot be parsed. */
  verify(encoded: string, secret: string): Promise<boolean> {
    this.#stats.verifies++;
    return this.#onKeyLane(() => verify(encoded, secret).catch(() => false));
  }

  /** Login lane: after any waiting key work; `ARGON2_BUSY` (and no work) when its queue is full. */
  verifyLogin(encoded: string, secret: string): Promise<boolean | Argon2Busy> {
    return this.#onLoginLane(() => {
      this.#stats.verifies++;
      this.#stats.loginVerifies++;
      return verify(encoded, secret).catch(() => false);
    });
  }

  /**
   * Whether a login job would be taken now rather than refused. A cheap look before a login's
   * store read: a flood of logins is shed here without a query each; the lane itself still
   * decides, since the queue may fill while the store answers.
   */
  loginLaneHasRoom(): boolean {
    const room = this.#running < this.#options.concurrency || this.#loginWaiting.length < this.#loginQueueLimit;
    if (!room) this.#stats.loginRefusals++;
    return room;
  }

  /** Login lane, with the given parameters (default: the current ones). */
  hashLogin(secret: string, params: Argon2Params = this.params): Promise<string | Argon2Busy> {
    return this.#onLoginLane(() => hashWith(secret, params));
  }

  async #onKeyLane<T>(work: () => Promise<T>): Promise<T> {
    if (this.#running < this.#options.concurrency) this.#running++;
    else await new Promise<void>((resolve) => this.#keyWaiting.push(resolve));
    return this.#holding(work);
  }

  async #onLoginLane<T>(work: () => Promise<T>): Promise<T | Argon2Busy> {
    if (this.#running < this.#options.concurrency) this.#running++;
    else if (this.#loginWaiting.length >= this.#loginQueueLimit) {
      this.#stats.loginRefusals++;
      return ARGON2_BUSY;
    } else await new Promise<void>((resolve) => this.#loginWaiting.push(resolve));
    return this.#holding(work);
  }

  /** Runs work in a slot already taken, then hands the slot on: key work first, then logins. */
  async #holding<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } finally {
      // A released slot is handed straight to the next waiter, so a newcomer can never overtake it.
      const next = this.#keyWaiting.shift() ?? this.#loginWaiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}

function hashWith(secret: string, { memoryKiB, timeCost, parallelism }: Argon2Params): Promise<string> {
  return hash(secret, { memoryCost: memoryKiB, timeCost, parallelism });
}
