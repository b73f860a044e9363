import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { RedisFailureLimiter } from '../../src/redis/failure-limiter.ts';
import { freePort } from '../support/gateway-process.ts';
import { describeWithRedis, redisUrl } from '../support/services.ts';

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

describeWithRedis('RedisFailureLimiter', () => {
  const prefix = `gh-test-${randomBytes(4).toString('hex')}:`;
  let a: Redis;
  let b: Redis;
  const limiter = (redis: Redis, options: { limit?: number; windowMs?: number; onError?: (error: unknown) => void } = {}) =>
    new RedisFailureLimiter({ redis, name: 'login', limit: options.limit ?? 5, windowMs: options.windowMs ?? 60_000, prefix, onError: options.onError });

  beforeAll(async () => {
    // Two connections: two replicas.
    a = createRedisConnection(redisUrl()!, { name: 'test:limiter-a' });
    b = createRedisConnection(redisUrl()!, { name: 'test:limiter-b' });
    await Promise.all([ready(a), ready(b)]);
  });
  afterAll(async () => {
    const keys = await a.keys(`${prefix}*`);
    if (keys.length > 0) await a.del(...keys);
    await Promise.all([closeRedisConnection(a), closeRedisConnection(b)]);
  });

  it('shares the count between replicas: failures on two of them add up to one block, seen by both', async () => {
    const one = limiter(a);
    const two = limiter(b);
    for (let i = 0; i < 3; i++) await one.recordFailure('email:shared@example.test');
    expect(await two.blockedFor('email:shared@example.test')).toBe(0);
    await two.recordFailure('email:shared@example.test');
    expect(await one.blockedFor('email:shared@example.test')).toBe(0);
    await two.recordFailure('email:shared@example.test');
    const blocked = await one.blockedFor('email:shared@example.test');
    expect(blocked).toBeGreaterThan(55);
    expect(blocked).toBeLessThanOrEqual(60);
    expect(await two.blockedFor('email:shared@example.test')).toBe(blocked);
    expect(await one.blockedFor('email:other@example.test')).toBe(0);
  });

  it('counts concurrent failures from many replicas exactly (atomic increments)', async () => {
    const replicas = [limiter(a, { limit: 100 }), limiter(b, { limit: 100 })];
    await Promise.all(Array.from({ length: 99 }, (_, i) => replicas[i % 2]!.recordFailure('addr:203.0.113.9')));
    expect(await replicas[0]!.blockedFor('addr:203.0.113.9')).toBe(0);
    await replicas[1]!.recordFailure('addr:203.0.113.9');
    expect(await replicas[0]!.blockedFor('addr:203.0.113.9')).toBeGreaterThan(0);
  });

  it('opens the window at the first failure and closes it after windowMs', async () => {
    const short = limiter(a, { limit: 2, windowMs: 300 });
    await short.recordFailure('prefix:Ab3dEf9h');
    await short.recordFailure('prefix:Ab3dEf9h');
    expect(await limiter(b, { limit: 2, windowMs: 300 }).blockedFor('prefix:Ab3dEf9h')).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 400));
    // The other replica, whose memory never saw these failures, and Redis agree the window closed.
    expect(await limiter(b, { limit: 2, windowMs: 300 }).blockedFor('prefix:Ab3dEf9h')).toBe(0);
  });

  it('stores subjects hashed: no email or address in a Redis key', async () => {
    await limiter(a).recordFailure('email:private.person@example.test');
    const keys = await a.keys(`${prefix}*`);
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.join(' ')).not.toMatch(/private\.person|example\.test|203\.0\.113/);
  });

  it('with Redis unreachable, keeps limiting with its own counts: never fails open, never throws', async () => {
    const dead = createRedisConnection(`redis://127.0.0.1:${await freePort()}`, { name: 'test:dead' });
    const errors: unknown[] = [];
    try {
      const offline = limiter(dead, { limit: 3, onError: (error) => errors.push(error) });
      expect(await offline.blockedFor('email:x@example.test')).toBe(0);
      for (let i = 0; i < 3; i++) await offline.recordFailure('email:x@example.test');
      expect(await offline.blockedFor('email:x@example.test')).toBeGreaterThan(0);
      expect(errors.length).toBeGreaterThanOrEqual(4);
    } finally {
      dead.disconnect();
    }
  });

  it('keeps a block it saw itself when Redis has lost the count (a restarted, empty Redis)', async () => {
    const one = limiter(a, { limit: 2 });
    await one.recordFailure('email:flush@example.test');
    await one.recordFailure('email:flush@example.test');
    const keys = await a.keys(`${prefix}limit:login:*`);
    await a.del(...keys);
    expect(await one.blockedFor('email:flush@example.test')).toBeGreaterThan(0);
  });

  it('reserves atomically across replicas: of a burst spread over two, at most `limit` are let through', async () => {
    const replicas = [limiter(a, { limit: 10 }), limiter(b, { limit: 10 })];
    const waits = await Promise.all(
      Array.from({ length: 400 }, (_, i) => replicas[i % 2]!.reserve(['email:burst@example.test', `addr:198.51.100.${i % 7}`])),
    );
    expect(waits.filter((wait) => wait === 0)).toHaveLength(10);
    expect(waits.every((wait) => wait === 0 || (wait > 0 && wait <= 60))).toBe(true);
    expect(await replicas[0]!.blockedFor('email:burst@example.test')).toBeGreaterThan(0);
  });

  it('charges no subject for a refused reservation, and gives a released one back on every replica', async () => {
    const one = limiter(a, { limit: 1 });
    const two = limiter(b, { limit: 1 });
    expect(await one.reserve(['email:r@example.test', 'addr:192.0.2.1'])).toBe(0);
    expect(await two.reserve(['email:r@example.test', 'addr:192.0.2.2'])).toBeGreaterThan(0);
    expect(await two.reserve(['email:s@example.test', 'addr:192.0.2.2'])).toBe(0);
    await one.release('email:r@example.test');
    expect(await two.reserve(['email:r@example.test', 'addr:192.0.2.3'])).toBe(0);
  });

  it('with Redis unreachable, reserves against its own counts: a burst is still bounded', async () => {
    const dead = createRedisConnection(`redis://127.0.0.1:${await freePort()}`, { name: 'test:dead-reserve' });
    try {
      const offline = limiter(dead, { limit: 3, onError: () => {} });
      const waits = await Promise.all(Array.from({ length: 50 }, () => offline.reserve(['email:y@example.test'])));
      expect(waits.filter((wait) => wait === 0)).toHaveLength(3);
    } finally {
      dead.disconnect();
    }
  });

  it('refuses an attempt whose reservation was answered too late, rather than allowing `limit` per replica', async () => {
    // What ioredis does when the answer arrives after commandTimeout (an event loop busy with the burst itself).
    const late = { eval: () => Promise.reject(new Error('Command timed out')), del: () => Promise.resolve(0) } as unknown as Redis;
    const slow = limiter(late, { limit: 3, onError: () => {} });
    const waits = await Promise.all(Array.from({ length: 20 }, () => slow.reserve(['email:late@example.test'])));
    expect(waits.filter((wait) => wait === 0)).toEqual([]);
    // The local count was given back: nothing is known to have failed, the next attempt is asked about again.
    expect(await slow.reserve(['email:late@example.test'])).toBe(1);
  });
});
