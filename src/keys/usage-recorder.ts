import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Store } from '../store/store.ts';

/** `last_used_at` must show within 5 s of a use (docs/api-keys.md); one write a second leaves room for a slow one. */
export const DEFAULT_USAGE_FLUSH_INTERVAL_MS = 1_000;
/**
 * The embedded store writes on the event loop's own thread and stalls every request meanwhile:
 * 13–15 µs a key on PGlite when this was set, 1–3 µs on SQLite (docs/adr/0021-embedded-store-sqlite.md).
 * Writing a third as often cuts those stalls to a third and still shows a use within 5 s (3 s,
 * plus the write, with room for a slow one).
 */
export const EMBEDDED_USAGE_FLUSH_INTERVAL_MS = 3_000;

/**
 * Keys written per statement. The embedded store runs each statement on the event loop's own
 * thread: on PGlite, one UPDATE of 10,000 keys stalled every request behind it for its whole
 * length (the `events-many-keys` p99); chunks of 200 (~20 ms there) with a turn of the event
 * loop between them did not.
 */
export const USAGE_WRITE_CHUNK = 200;

export interface UsageRecorderOptions {
  store: Pick<Store, 'recordKeyUses'>;
  /** Default DEFAULT_USAGE_FLUSH_INTERVAL_MS. */
  intervalMs?: number;
  /** Told of a failed timed flush (the uses are kept for the next one). */
  onError?: (error: unknown) => void;
}

/**
 * Write-behind of `last_used_at` (docs/adr/0006-api-keys-fillfactor.md): a use is one Map write on
 * the request path; a timer writes the latest use of every key, USAGE_WRITE_CHUNK keys per
 * `recordKeyUses` call. A failed write keeps its unwritten uses for the next try.
 */
export class UsageRecorder {
  readonly #store: UsageRecorderOptions['store'];
  readonly #onError: (error: unknown) => void;
  readonly #timer: ReturnType<typeof setInterval>;
  /** key id → latest use, in ms since the epoch: a number, so recording allocates no Date. */
  #pending = new Map<number, number>();
  #writing: Promise<void> | undefined;

  constructor(options: UsageRecorderOptions) {
    const intervalMs = options.intervalMs ?? DEFAULT_USAGE_FLUSH_INTERVAL_MS;
    if (!Number.isFinite(intervalMs) || intervalMs <= 0) throw new RangeError('UsageRecorder: intervalMs must be a positive number');
    this.#store = options.store;
    this.#onError = options.onError ?? (() => {});
    this.#timer = setInterval(() => this.#tick(), intervalMs);
    // Never what keeps the process alive; shutdown calls close() to write the last uses.
    this.#timer.unref();
  }

  /** O(1), no I/O. `at`: a Date or milliseconds since the epoch; an older use never replaces a newer one. */
  record(keyId: number, at: Date | number): void {
    const ms = typeof at === 'number' ? at : at.getTime();
    const latest = this.#pending.get(keyId);
    if (latest === undefined || ms > latest) this.#pending.set(keyId, ms);
  }

  /** Writes what is pending in one call, after any write in flight. Rejects if the store does (the uses are kept). */
  async flush(): Promise<void> {
    while (this.#writing !== undefined) await this.#writing.catch(() => {});
    if (this.#pending.size === 0) return;
    const batch = this.#pending;
    this.#pending = new Map();
    this.#writing = this.#write(batch);
    try {
      await this.#writing;
    } finally {
      this.#writing = undefined;
    }
  }

  /** Stops the timer, then writes what is pending. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }

  /** Uses waiting for a write (for tests and metrics). */
  get pending(): number {
    return this.#pending.size;
  }

  #tick(): void {
    // A slow store must not stack up writes: the next tick takes everything gathered meanwhile.
    if (this.#writing !== undefined) return;
    this.flush().catch(this.#onError);
  }

  async #write(batch: Map<number, number>): Promise<void> {
    const uses = [...batch];
    for (let start = 0; start < uses.length; start += USAGE_WRITE_CHUNK) {
      if (start > 0) await nextTurn();
      const chunk = new Map<number, Date>();
      for (const [keyId, ms] of uses.slice(start, start + USAGE_WRITE_CHUNK)) chunk.set(keyId, new Date(ms));
      try {
        await this.#store.recordKeyUses(chunk);
      } catch (error) {
        for (const [keyId, ms] of uses.slice(start)) this.record(keyId, ms);
        throw error;
      }
    }
  }
}
