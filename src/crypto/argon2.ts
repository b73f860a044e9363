import { hash, verify } from '@node-rs/argon2';

export interface Argon2Options {
  memoryKiB: number;
  timeCost: number;
  parallelism: number;
  /** At most this many hashes or verifies run at once, so argon2 never starves the event loop's thread pool. */
  concurrency: number;
}

/**
 * argon2id hashing for admin passwords and API keys. Concurrency is capped: a storm of
 * cold keys or failed logins queues here instead of taking every libuv thread.
 */
export class Argon2Hasher {
  readonly #options: Argon2Options;
  #running = 0;
  readonly #waiting: Array<() => void> = [];
  #verifies = 0;

  constructor(options: Argon2Options) {
    this.#options = options;
  }

  /** Verifies performed since start (for the benchmark's "argon2 calls per key"). */
  get verifyCount(): number {
    return this.#verifies;
  }

  hash(secret: string): Promise<string> {
    const { memoryKiB, timeCost, parallelism } = this.#options;
    return this.#limited(() => hash(secret, { memoryCost: memoryKiB, timeCost, parallelism }));
  }

  /** False for a mismatch and for a hash string that cannot be parsed. */
  verify(encoded: string, secret: string): Promise<boolean> {
    this.#verifies++;
    return this.#limited(() => verify(encoded, secret).catch(() => false));
  }

  async #limited<T>(work: () => Promise<T>): Promise<T> {
    if (this.#running < this.#options.concurrency) this.#running++;
    // A released slot is handed straight to the next waiter, so a newcomer can never overtake it.
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}
