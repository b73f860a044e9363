import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Charge } from '../../../src/policy/rate-limits.ts';
import { LEASE, RETURN } from '../../../src/redis/rate-lease-scripts.ts';
import { SharedRateLimiter } from '../../../src/redis/shared-rate-limiter.ts';

const charge: Charge = { limit: 'key', keyId: 7, tool: undefined, rule: { requests: 100, perSeconds: 60 }, times: 1 };

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
}

function limiter(redis: ScriptedRedis) {
  const seen = { fallback: 0, refused: 0 };
  const rates = new SharedRateLimiter({
    redis: redis as unknown as Redis,
    replicaId: 'r1',
    prefix: 'p:',
    observe: { fallback: () => void seen.fallback++, refused: () => void seen.refused++ },
  });
  return { rates, seen };
}

describe('SharedRateLimiter: when Redis does not answer as it should', () => {
  it('an answer too late to know whether a lease was granted: refused for a second, never counted twice, and the lease given back', async () => {
    const redis = new ScriptedRedis();
    redis.lease = () => Promise.reject(new Error('Command timed out'));
    const { rates, seen } = limiter(redis);
    expect(await rates.take([charge])).toMatchObject({ admitted: false, retryAfter: 1, refused: charge });
    expect(seen).toEqual({ fallback: 0, refused: 1 });
    const [lease, given] = redis.sent;
    expect(lease).toEqual({ script: 'lease', args: ['p:rate:k:7:z', 'p:rate:k:7:h', 100, 60_000, 1, 1_000, expect.stringMatching(/^l:r1:/)] });
    // Whatever it may have granted is returned unused, under the same name.
    expect(given).toEqual({ script: 'return', args: ['p:rate:k:7:z', 'p:rate:k:7:h', lease!.args[6], 0, 937] });
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

  it('concurrent requests share one lease request, sized for all of them (at most a tenth of the limit)', async () => {
    const redis = new ScriptedRedis();
    let answer: (value: unknown) => void = () => {};
    redis.lease = () => new Promise((resolve) => (answer = resolve));
    const { rates } = limiter(redis);
    const pending = Promise.all(Array.from({ length: 3 }, () => rates.take([charge])));
    await new Promise((resolve) => setImmediate(resolve));
    expect(redis.sent.filter((call) => call.script === 'lease')).toHaveLength(1);
    answer([3, 97, 0, 60_000]);
    expect((await pending).map((counted) => counted.admitted)).toEqual([true, true, true]);
    // Used up: given back at once, the three slots kept.
    expect(redis.sent.at(-1)).toMatchObject({ script: 'return', args: [expect.any(String), expect.any(String), expect.any(String), 3, 937] });
    rates.close();
  });

  it('a refusal from Redis is kept until the lease length at most, with the seconds it said', async () => {
    const redis = new ScriptedRedis();
    redis.lease = () => Promise.resolve([0, 0, 30_000, 30_000]);
    const { rates, seen } = limiter(redis);
    expect(await rates.take([charge])).toMatchObject({ admitted: false, retryAfter: 30, quotas: [{ remaining: 0, resetSeconds: 30 }] });
    // Asked again at once: answered from what Redis said, with no round trip.
    expect(rates.take([charge])).toMatchObject({ admitted: false, retryAfter: 30 });
    expect(redis.sent).toHaveLength(1);
    expect(seen.refused).toBe(2);
    rates.close();
  });
});

describe('SharedRateLimiter: a changed limit', () => {
  it('stops using what it leased under the old limit: given back, and the new limit leased', async () => {
    const redis = new ScriptedRedis();
    redis.lease = () => Promise.resolve([10, 90, 0, 60_000]);
    const { rates } = limiter(redis);
    expect(await rates.take([charge])).toMatchObject({ admitted: true });
    // Nine slots of the old lease are left; the limit is lowered to five.
    const lowered: Charge = { ...charge, rule: { requests: 5, perSeconds: 60 } };
    redis.lease = () => Promise.resolve([0, 0, 30_000, 30_000]);
    expect(await rates.take([lowered])).toMatchObject({ admitted: false, retryAfter: 30 });
    const calls = redis.sent.map((call) => call.script);
    expect(calls).toEqual(['lease', 'return', 'lease']);
    // The old lease went back with the one slot it used; the new one asked under the new limit.
    expect(redis.sent[1]!.args[3]).toBe(1);
    expect(redis.sent[2]!.args.slice(2, 4)).toEqual([5, 60_000]);
    rates.close();
  });
});
