import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_USAGE_FLUSH_INTERVAL_MS, USAGE_WRITE_CHUNK, UsageRecorder } from '../../../src/keys/usage-recorder.ts';
import type { Store } from '../../../src/store/store.ts';

const T0 = Date.parse('2026-06-01T00:00:00Z');

/** `recordKeyUses` that keeps every batch it was given, and fails while `down`. */
class UseLog implements Pick<Store, 'recordKeyUses'> {
  readonly batches: Array<Map<number, Date>> = [];
  down = false;
  recordKeyUses(uses: ReadonlyMap<number, Date>): Promise<void> {
    if (this.down) return Promise.reject(new Error('connect ECONNREFUSED'));
    this.batches.push(new Map(uses));
    return Promise.resolve();
  }
}

const at = (ms: number) => new Date(T0 + ms);

describe('UsageRecorder (write-behind last_used_at)', () => {
  let store: UseLog;
  let recorder: UsageRecorder;
  beforeEach(() => {
    vi.useFakeTimers();
    store = new UseLog();
    recorder = new UsageRecorder({ store });
  });
  afterEach(async () => {
    await recorder.close().catch(() => {});
    vi.useRealTimers();
  });

  it('writes nothing on the request path, then many uses in one call per interval, the latest per key', async () => {
    recorder.record(1, at(10));
    recorder.record(1, T0 + 30);
    recorder.record(1, at(20)); // an older use never replaces a newer one
    recorder.record(2, at(5));
    expect(store.batches).toHaveLength(0);

    await vi.advanceTimersByTimeAsync(DEFAULT_USAGE_FLUSH_INTERVAL_MS);
    expect(store.batches).toEqual([
      new Map([
        [1, at(30)],
        [2, at(5)],
      ]),
    ]);
    await vi.advanceTimersByTimeAsync(DEFAULT_USAGE_FLUSH_INTERVAL_MS * 3);
    expect(store.batches).toHaveLength(1); // nothing new, no call
  });

  it('keeps the uses of a failed write and merges them into the next, the latest per key winning', async () => {
    const errors: unknown[] = [];
    await recorder.close();
    recorder = new UsageRecorder({ store, intervalMs: 100, onError: (error) => errors.push(error) });
    recorder.record(1, at(10));
    recorder.record(2, at(10));
    store.down = true;
    await vi.advanceTimersByTimeAsync(100);
    expect(errors).toHaveLength(1);
    expect(recorder.pending).toBe(2);

    recorder.record(1, at(50));
    recorder.record(3, at(1));
    store.down = false;
    await vi.advanceTimersByTimeAsync(100);
    expect(store.batches).toEqual([
      new Map([
        [1, at(50)],
        [2, at(10)],
        [3, at(1)],
      ]),
    ]);
  });

  it('flush rejects when the store does and keeps the uses', async () => {
    recorder.record(1, at(1));
    store.down = true;
    await expect(recorder.flush()).rejects.toThrow('ECONNREFUSED');
    store.down = false;
    await recorder.flush();
    expect(store.batches).toEqual([new Map([[1, at(1)]])]);
  });

  it('close writes what is pending and stops the timer', async () => {
    recorder.record(7, at(3));
    await recorder.close();
    expect(store.batches).toEqual([new Map([[7, at(3)]])]);
    recorder.record(8, at(4));
    await vi.advanceTimersByTimeAsync(DEFAULT_USAGE_FLUSH_INTERVAL_MS * 5);
    expect(store.batches).toHaveLength(1);
  });

  it('does not stack writes behind a slow store', async () => {
    let release!: () => void;
    let calls = 0;
    await recorder.close();
    recorder = new UsageRecorder({
      store: {
        recordKeyUses: () => {
          calls++;
          return new Promise<void>((resolve) => (release = resolve));
        },
      },
      intervalMs: 100,
    });
    recorder.record(1, at(1));
    await vi.advanceTimersByTimeAsync(100);
    recorder.record(2, at(2));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(calls).toBe(1);
    const closing = recorder.close(); // waits for the write in flight, then writes the rest
    release();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toBe(2);
    release();
    await closing;
  });

  it.each([
    ['zero', 0],
    ['negative', -1],
    ['not a number', Number.NaN],
  ])('refuses an interval that is %s', (_what, intervalMs) => {
    expect(() => new UsageRecorder({ store, intervalMs })).toThrow(RangeError);
  });
});

describe('UsageRecorder with many keys in one interval', () => {
  it('writes them USAGE_WRITE_CHUNK keys per statement, and keeps the unwritten ones when a statement fails', async () => {
    const store = new UseLog();
    const recorder = new UsageRecorder({ store, intervalMs: 60_000 });
    const keys = 2 * USAGE_WRITE_CHUNK + 7;
    for (let id = 1; id <= keys; id++) recorder.record(id, at(id));
    await recorder.flush();
    expect(store.batches.map((batch) => batch.size)).toEqual([USAGE_WRITE_CHUNK, USAGE_WRITE_CHUNK, 7]);
    expect(store.batches[2]!.get(keys)).toEqual(at(keys));

    // The second statement fails: the first chunk is written, the rest is kept for the next flush.
    for (let id = 1; id <= keys; id++) recorder.record(id, at(id + 1));
    let calls = 0;
    const original = store.recordKeyUses.bind(store);
    store.recordKeyUses = (uses) => (++calls === 2 ? Promise.reject(new Error('connect ECONNREFUSED')) : original(uses));
    store.batches.length = 0;
    await expect(recorder.flush()).rejects.toThrow('ECONNREFUSED');
    expect(store.batches.map((batch) => batch.size)).toEqual([USAGE_WRITE_CHUNK]);
    expect(recorder.pending).toBe(keys - USAGE_WRITE_CHUNK);
    await recorder.close();
    expect(store.batches.map((batch) => batch.size)).toEqual([USAGE_WRITE_CHUNK, USAGE_WRITE_CHUNK, 7]);
    expect(store.batches[1]!.get(USAGE_WRITE_CHUNK + 1)).toEqual(at(USAGE_WRITE_CHUNK + 2));
  });
});
