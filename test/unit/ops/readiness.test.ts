import { afterEach, describe, expect, it, vi } from 'vitest';
import { readinessOf, StorePing, type ReadinessFacts, type Readiness } from '../../../src/ops/readiness.ts';

const REDIS_OK = { status: 'ok', connected: true, subscribed: true } as const;
const REDIS_LOST = { status: 'degraded', connected: false, subscribed: false } as const;
const REDIS_UNSUBSCRIBED = { status: 'degraded', connected: true, subscribed: false } as const;
const MEMORY = { keys: true, adminSessions: true };
const NOTHING_IN_MEMORY = { keys: false, adminSessions: false };

describe('readinessOf', () => {
  const cases: ReadonlyArray<{ description: string; facts: ReadinessFacts; expected: Readiness }> = [
    {
      description: 'everything up',
      facts: { draining: false, store: 'ok', redis: REDIS_OK, memory: MEMORY },
      expected: { status: 'ready', ready: true, down: [] },
    },
    {
      description: 'no Redis configured, store up',
      facts: { draining: false, store: 'ok', redis: undefined, memory: NOTHING_IN_MEMORY },
      expected: { status: 'ready', ready: true, down: [] },
    },
    {
      description: 'store down, caches serve: degraded, still ready',
      facts: { draining: false, store: 'down', redis: REDIS_OK, memory: MEMORY },
      expected: { status: 'degraded', ready: true, down: ['store'] },
    },
    {
      description: 'store down, no key cached but admin tokens checked in memory: still ready',
      facts: { draining: false, store: 'down', redis: undefined, memory: { keys: false, adminSessions: true } },
      expected: { status: 'degraded', ready: true, down: ['store'] },
    },
    {
      description: 'store down, admin sessions unsure but a key cached: still ready',
      facts: { draining: false, store: 'down', redis: REDIS_OK, memory: { keys: true, adminSessions: false } },
      expected: { status: 'degraded', ready: true, down: ['store'] },
    },
    {
      description: 'Redis lost, store up: degraded, ready (every guarantee holds through the store)',
      facts: { draining: false, store: 'ok', redis: REDIS_LOST, memory: NOTHING_IN_MEMORY },
      expected: { status: 'degraded', ready: true, down: ['redis'] },
    },
    {
      description: 'Redis connected but not subscribed counts as not fully up',
      facts: { draining: false, store: 'ok', redis: REDIS_UNSUBSCRIBED, memory: NOTHING_IN_MEMORY },
      expected: { status: 'degraded', ready: true, down: ['redis'] },
    },
    {
      description: 'store and Redis down, nothing acceptable from memory: unable to decide anything',
      facts: { draining: false, store: 'down', redis: REDIS_LOST, memory: NOTHING_IN_MEMORY },
      expected: { status: 'unavailable', ready: false, down: ['store', 'redis'] },
    },
    {
      description: 'store down, Redis back, but the caches not refilled: still unable',
      facts: { draining: false, store: 'down', redis: REDIS_OK, memory: NOTHING_IN_MEMORY },
      expected: { status: 'unavailable', ready: false, down: ['store'] },
    },
    {
      description: 'draining wins over everything, and still names what is down',
      facts: { draining: true, store: 'down', redis: REDIS_OK, memory: MEMORY },
      expected: { status: 'draining', ready: false, down: ['store'] },
    },
    {
      description: 'draining with everything up',
      facts: { draining: true, store: 'ok', redis: undefined, memory: MEMORY },
      expected: { status: 'draining', ready: false, down: [] },
    },
  ];
  it.each(cases)('$description', ({ facts, expected }) => {
    expect(readinessOf(facts)).toEqual(expected);
  });
});

describe('StorePing', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('reports up and down as the store answers, and tells the metric each time', async () => {
    let fail = false;
    const observed: boolean[] = [];
    const ping = new StorePing({ store: { ping: async () => (fail ? Promise.reject(new Error('down')) : undefined) }, observe: (up) => observed.push(up) });
    expect(await ping.check()).toBe('ok');
    fail = true;
    expect(await ping.check()).toBe('down');
    fail = false;
    expect(await ping.check()).toBe('ok');
    expect(observed).toEqual([true, false, true]);
  });

  it('answers down after its timeout while the store hangs, sharing the one ping in flight', async () => {
    vi.useFakeTimers();
    let calls = 0;
    let answer: (() => void) | undefined;
    const store = {
      ping: () => {
        calls++;
        return new Promise<void>((resolve) => (answer = resolve));
      },
    };
    const ping = new StorePing({ store, observe: () => {}, timeoutMs: 1_000 });
    const first = ping.check();
    const second = ping.check();
    await vi.advanceTimersByTimeAsync(1_000);
    expect([await first, await second]).toEqual(['down', 'down']);
    expect(calls).toBe(1);
    // The hung ping finally answers: the next check asks again.
    answer!();
    await vi.advanceTimersByTimeAsync(0);
    const third = ping.check();
    answer!();
    expect(await third).toBe('ok');
    expect(calls).toBe(2);
  });
});
