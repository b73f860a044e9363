/** An exchange waiting for the upstream's response headers, linked into `UpstreamDeadlines`. */
export interface AwaitingHeaders {
  /** `performance.now()` when its wait began (dispatch, or the last `touch`). */
  since: number;
  previous: AwaitingHeaders | undefined;
  next: AwaitingHeaders | undefined;
  linked: boolean;
  /** Its wait reached the bound: it answers 504, or (still sending its body) `touch`es itself. */
  expire(): void;
}

/** The sweep's period, as a fraction of the bound: a 504 arrives at most this much past it. */
const SWEEP_FRACTION = 20;
const MIN_SWEEP_MS = 10;
const MAX_SWEEP_MS = 1_000;

/**
 * `UPSTREAM_TIMEOUT` from the moment a request is ready to go upstream, the wait for a free
 * connection included (undici's `headersTimeout` starts only once the request is written, so a
 * request queued behind a full pool waited up to a bound per connection freed).
 *
 * One timer for all requests instead of one each: every wait has the same bound, so waits
 * appended in the order they begin are also in the order they end, and a linked list (O(1)
 * append and removal, no allocation) swept from its head every `timeoutMs / 20` finds every
 * expired one. The sweep runs only while some request is waiting.
 */
export class UpstreamDeadlines {
  readonly #timeoutMs: number;
  readonly #periodMs: number;
  #head: AwaitingHeaders | undefined = undefined;
  #tail: AwaitingHeaders | undefined = undefined;
  #sweep: NodeJS.Timeout | undefined = undefined;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
    this.#periodMs = Math.min(MAX_SWEEP_MS, Math.max(MIN_SWEEP_MS, Math.floor(timeoutMs / SWEEP_FRACTION)));
  }

  /** Starts `entry`'s wait now (it must not be linked). */
  start(entry: AwaitingHeaders, since: number): void {
    entry.since = since;
    entry.linked = true;
    entry.previous = this.#tail;
    entry.next = undefined;
    if (this.#tail === undefined) this.#head = entry;
    else this.#tail.next = entry;
    this.#tail = entry;
    if (this.#sweep === undefined) {
      this.#sweep = setInterval(() => this.#expire(), this.#periodMs);
      // Requests in flight keep the process alive by their sockets, not by this timer.
      this.#sweep.unref();
    }
  }

  /** Restarts `entry`'s wait from now. */
  touch(entry: AwaitingHeaders): void {
    this.stop(entry);
    this.start(entry, performance.now());
  }

  /** Ends `entry`'s wait (headers arrived, the exchange failed or was upgraded). Idempotent. */
  stop(entry: AwaitingHeaders): void {
    if (!entry.linked) return;
    entry.linked = false;
    if (entry.previous === undefined) this.#head = entry.next;
    else entry.previous.next = entry.next;
    if (entry.next === undefined) this.#tail = entry.previous;
    else entry.next.previous = entry.previous;
    entry.previous = undefined;
    entry.next = undefined;
  }

  /** Stops the sweep (the upstream is closing); waits still linked are left to their exchanges. */
  close(): void {
    clearInterval(this.#sweep);
    this.#sweep = undefined;
  }

  #expire(): void {
    const bound = performance.now() - this.#timeoutMs;
    // Expiring may touch the entry (appended at the tail, with a wait from now): it is past the bound's reach here.
    for (let entry = this.#head; entry !== undefined && entry.since <= bound; entry = this.#head) {
      this.stop(entry);
      entry.expire();
    }
    if (this.#head === undefined) {
      clearInterval(this.#sweep);
      this.#sweep = undefined;
    }
  }
}
