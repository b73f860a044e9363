/**
 * Singleflight: concurrent callers asking for the same key share one piece of work. The
 * entry is dropped when the work settles, so a failure is never remembered as an answer
 * (callers cache what they want to keep, themselves).
 */
export class Flights<K, V> {
  readonly #inFlight = new Map<K, Promise<V>>();

  /** Joins the flight for `key`, or starts one with `work`, which must return a promise (not throw). */
  run(key: K, work: () => Promise<V>): Promise<V> {
    const existing = this.#inFlight.get(key);
    if (existing !== undefined) return existing;
    const flight = work();
    this.#inFlight.set(key, flight);
    // Compared before deleting: after `forget`, a newer flight may hold the slot.
    const settle = () => {
      if (this.#inFlight.get(key) === flight) this.#inFlight.delete(key);
    };
    flight.then(settle, settle);
    return flight;
  }

  /** Newcomers start a new flight; callers already waiting keep theirs. */
  forget(key: K): void {
    this.#inFlight.delete(key);
  }

  clear(): void {
    this.#inFlight.clear();
  }

  get size(): number {
    return this.#inFlight.size;
  }
}
