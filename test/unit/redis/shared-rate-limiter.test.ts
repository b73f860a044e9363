import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Charge } from '../../../src/policy/rate-limits.ts';
import { LEASE, RETURN } from '../../../src/redis/rate-lease-scripts.ts';
import { SharedRateLimiter } from '../../../src/redis/shared-rate-limiter.ts';

const charge: Charge = { limit: 'key', keyId: 7, tool: undefined, rule: { requests: 100, perSeconds: 60 }, times: 1 };
const KEY = 'p:rate:k:7';
/** A lease's length and the period its uses are grouped by, for a limit over 60 s. */
const LEASE_MS = 1_000;
const GROUP_MS = 937;

/** A stand-in for the commands connection: what each script call answers, and what was sent. */
class ScriptedRedis {
  status = 'ready';
  readonly sent: Array<{ script: 'lease' | 'return'; args: unknown[] }> = [];
  lease: () => Promise<unknown> = () => Promise.resolve([1, 99, 0, 60_000]);

  eval(script: string, _keys: number, ...args: unknown[]): Promise<unknown> {
    const name = script === LEASE ? 'lease' : script === RETURN ? 'return' : undefined;
    if (name === undefined) throw new Error('unknown script');
    this.sent.push({ script: name, args });
    return name === 'lease' ? this.lease() : Promise.resolve(0);
  }

  /** What the lease calls asked for: [requests, interval ms, slots wanted]. */
  asked(): unknown[][] {
    return this.sent.filter((call) => call.script === 'lease').map((call) => call.args.slice(1, 4));
  }
}

function limiter(redis: ScriptedRedis) {
  const seen = { fallback: 0 };
  const rates = new SharedRateLimiter({
    redis: redis as unknown as Redis,
    replicaId: 'r1',
    prefix: 'p:',
    observe: { fallback: () => void seen.fallback++ },
  });
  return { rates, seen };
}

describe('SharedRateLimiter: when Redis does not answer as it should', () => {
  it('an answer later than the command timeout is Redis down: counted by this replica alone, at the full limit', async () => {
    const redis = new ScriptedRedis();
    redis.lease = () => Promise.reject(new Error('Command timed out'));
    const { rates, seen } = limiter(redis);
    expect(await rates.take([charge])).toMatchObject({ admitted: true });
    expect(seen).toEqual({ fallback: 1 });
    expect(redis.sent.map(({ script }) => script)).toEqual(['lease']);
    rates.close();
  });

  it('a failing Redis: counted by this replica alone, at the full limit', async () => {
    const redis = new ScriptedRedis();
    redis.lease = () => Promise.reject(new Error('OOM command not allowed'));
    const { rates, seen } = limiter(redis);
    expect(await rates.take([charge])).toMatchObject({ admitted: true });
    expect(seen.fallback).toBe(1);
    rates.close();
  });

  it('a Redis not connected is not asked at all', async () => {
    const redis = new ScriptedRedis();
    redis.status = 'reconnecting';
    const { rates, seen } = limiter(redis);
    expect(rates.take([charge])).toMatchObject({ admitted: true });
    expect(redis.sent).toEqual([]);
    expect(seen.fallback).toBe(1);
    rates.close();
  });
});

describe('SharedRateLimiter: leases', () => {
  it('concurrent requests share one lease request, sized for all of them; used up, it goes back with when its slots were used', async () => {
    const redis = new ScriptedRedis();
    let answer: (value: unknown) => void = () => {};
    redis.lease = () => new Promise((resolve) => (answer = resolve));
    const { rates } = limiter(redis);
    const pending = Promise.all(Array.from({ length: 3 }, () => rates.take([charge])));
    await new Promise((resolve) => setImmediate(resolve));
    expect(redis.asked()).toEqual([[100, 60_000, 3]]);
    answer([3, 97, 0, 60_000]);
    expect((await pending).map((counted) => counted.admitted)).toEqual([true, true, true]);
    // Three slots used within the same period: one group, stamped by its last use (ms after the lease was asked for).
    const returned = redis.sent.at(-1)!;
    expect(returned).toMatchObject({ script: 'return', args: [KEY, expect.stringMatching(/^l:r1:\d+:3$/), LEASE_MS, GROUP_MS, expect.any(Number), 3] });
    expect(returned.args[4]).toBeGreaterThanOrEqual(0);
    rates.close();
  });

  it('a batch needing more slots than a tenth of the limit asks for all of them at once', async () => {
    const redis = new ScriptedRedis();
    redis.lease = () => Promise.resolve([30, 70, 0, 60_000]);
    const { rates } = limiter(redis);
    expect(await rates.take([{ ...charge, times: 30 }])).toMatchObject({ admitted: true });
    expect(redis.asked()).toEqual([[100, 60_000, 30]]);
    rates.close();
  });

  it('near the end of the shared count, asks for no more than half of what was left', async () => {
    const redis = new ScriptedRedis();
    const rates = limiter(redis).rates;
    // Plenty left: leases grow as they are used up (1, 2, 4 …).
    redis.lease = () => Promise.resolve([1, 99, 0, 60_000]);
    await rates.take([charge]);
    redis.lease = () => Promise.resolve([2, 3, 0, 60_000]);
    await rates.take([charge]);
    await rates.take([charge]);
    // Three left at the last answer: the next lease asks for two, not four.
    redis.lease = () => Promise.resolve([2, 1, 0, 60_000]);
    await rates.take([charge]);
    expect(redis.asked().map((asked) => asked[2])).toEqual([1, 2, 2]);
    rates.close();
  });

  it('a refusal from Redis is answered from memory for a quarter of a lease at most, with the seconds it said', async () => {
    const redis = new ScriptedRedis();
    redis.lease = () => Promise.resolve([0, 0, 30_000, 30_000]);
    const { rates } = limiter(redis);
    expect(await rates.take([charge])).toMatchObject({ admitted: false, retryAfter: 30, quotas: [{ remaining: 0, resetSeconds: 30 }] });
    // Asked again at once: answered from what Redis said, with no round trip.
    expect(rates.take([charge])).toMatchObject({ admitted: false, retryAfter: 30 });
    expect(redis.sent).toHaveLength(1);
    rates.close();
  });
});

describe('SharedRateLimiter: a changed limit', () => {
  it('has a lease of its own: nothing leased under the old limit is used for a request decided under the new one', async () => {
    const redis = new ScriptedRedis();
    redis.lease = () => Promise.resolve([10, 90, 0, 60_000]);
    const { rates } = limiter(redis);
    expect(await rates.take([{ ...charge, times: 10 }])).toMatchObject({ admitted: true });
    expect(await rates.take([charge])).toMatchObject({ admitted: true });
    // Nine slots of the old limit's lease are left; the limit is lowered to five, and Redis's count says none is left.
    const lowered: Charge = { ...charge, rule: { requests: 5, perSeconds: 60 } };
    redis.lease = () => Promise.resolve([0, 0, 30_000, 30_000]);
    expect(await rates.take([lowered])).toMatchObject({ admitted: false, retryAfter: 30 });
    expect(redis.asked().at(-1)).toEqual([5, 60_000, 1]);
    rates.close();
  });

  it('requests still in flight under the old limit and new ones under the new limit do not take each other\'s leases', async () => {
    const redis = new ScriptedRedis();
    const answers: Array<(value: unknown) => void> = [];
    redis.lease = () => new Promise((resolve) => answers.push(resolve));
    const { rates } = limiter(redis);
    const old = rates.take([charge]);
    await new Promise((resolve) => setImmediate(resolve));
    const lowered: Charge = { ...charge, rule: { requests: 5, perSeconds: 60 } };
    const next = rates.take([lowered]);
    await new Promise((resolve) => setImmediate(resolve));
    // Two lease requests, one under each limit, on the same count in Redis.
    expect(redis.asked()).toEqual([[100, 60_000, 1], [5, 60_000, 1]]);
    expect(redis.sent.every((call) => call.args[0] === KEY)).toBe(true);
    // Each is answered, in order, and each request takes its own limit's slot.
    answers[0]!([1, 4, 0, 60_000]);
    answers[1]!([1, 3, 0, 60_000]);
    expect(await old).toMatchObject({ admitted: true, quotas: [{ charge, remaining: 4 }] });
    expect(await next).toMatchObject({ admitted: true, quotas: [{ charge: lowered, remaining: 3 }] });
    expect(redis.asked()).toHaveLength(2);
    rates.close();
  });
});
