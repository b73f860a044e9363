import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors/gateway-error.ts';
import { RedisSessionBindings } from '../../src/mcp/redis-session-bindings.ts';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { describeWithRedis, redisUrl } from '../support/services.ts';
import { until } from '../support/until.ts';

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

describeWithRedis('RedisSessionBindings', () => {
  const prefix = `gh-test-${randomBytes(4).toString('hex')}:`;
  let a: Redis;
  let b: Redis;
  const replica = (redis: Redis, ttlMs = 60_000) => new RedisSessionBindings({ redis, prefix, ttlMs });

  beforeAll(async () => {
    // Two connections: two replicas.
    a = createRedisConnection(redisUrl()!, { name: 'test:bindings-a' });
    b = createRedisConnection(redisUrl()!, { name: 'test:bindings-b' });
    await Promise.all([ready(a), ready(b)]);
  });
  afterAll(async () => {
    const keys = await a.keys(`${prefix}*`);
    if (keys.length > 0) await a.del(...keys);
    await Promise.all([closeRedisConnection(a), closeRedisConnection(b)]);
  });

  it('a session bound on one replica is the same key\'s on another, and refused to any other key', async () => {
    const one = replica(a);
    const two = replica(b);
    expect(await one.bind('streamable:s-1', 11)).toBe(true);
    expect(await two.check('streamable:s-1', 11)).toBe('bound');
    expect(await two.check('streamable:s-1', 12)).toBe('other_key');
    expect(await replica(b).check('streamable:s-1', 12)).toBe('other_key');
    expect(await two.bind('streamable:s-1', 12)).toBe(false);
    expect(await replica(b).check('streamable:never', 11)).toBe('unknown');
  });

  it('stores the session id hashed, with the time to live', async () => {
    await replica(a, 5_000).bind('streamable:secret-session-id', 3);
    const keys = await a.keys(`${prefix}*`);
    expect(keys.some((key) => key.includes('secret-session-id'))).toBe(false);
    const ttls = await Promise.all(keys.map((key) => a.pttl(key)));
    expect(ttls.some((ttl) => ttl > 0 && ttl <= 5_000)).toBe(true);
  });

  it('an unbind on one replica ends the session for replicas that had not seen it', async () => {
    const one = replica(a);
    await one.bind('legacy:s-2', 5);
    await one.unbind('legacy:s-2');
    expect(await replica(b).check('legacy:s-2', 5)).toBe('unknown');
  });

  it('expires with its time to live, and a check by its key extends it', async () => {
    // A prefix of its own, so that the one key under it is this binding's (its id is hashed).
    const own = `${prefix}ttl:`;
    const bindings = (redis: Redis) => new RedisSessionBindings({ redis, prefix: own, ttlMs: 60_000 });
    await bindings(a).bind('streamable:s-3', 9);
    const [key] = await a.keys(`${own}*`);
    expect(key).toBeDefined();
    expect(await a.pttl(key!)).toBeGreaterThan(59_000);
    // Time passing, as Redis sees it: the binding's life cut short, then a check by its key.
    await a.pexpire(key!, 5_000);
    expect(await bindings(b).check('streamable:s-3', 9)).toBe('bound');
    expect(await a.pttl(key!)).toBeGreaterThan(59_000);
    // Another key's check does not extend it.
    await a.pexpire(key!, 5_000);
    expect(await bindings(b).check('streamable:s-3', 10)).toBe('other_key');
    expect(await a.pttl(key!)).toBeLessThanOrEqual(5_000);
    // Its time to live out: Redis drops it, and no replica knows the session any more.
    await a.pexpire(key!, 1);
    await until(async () => (await a.exists(key!)) === 0);
    expect(await bindings(b).check('streamable:s-3', 9)).toBe('unknown');
  });

  it('with Redis away: its own sessions keep working, others are refused with 503, never guessed', async () => {
    const broken = createRedisConnection('redis://127.0.0.1:1', { name: 'test:bindings-down', connectTimeoutMs: 100 });
    try {
      const errors: unknown[] = [];
      const bindings = new RedisSessionBindings({ redis: broken, prefix, onError: (error) => errors.push(error) });
      expect(await bindings.bind('streamable:s-4', 1)).toBe(true);
      expect(errors.length).toBe(1);
      expect(await bindings.check('streamable:s-4', 1)).toBe('bound');
      expect(await bindings.check('streamable:s-4', 2)).toBe('other_key');
      const refused = await bindings.check('streamable:elsewhere', 1).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(GatewayError);
      expect((refused as GatewayError).code).toBe('store_unavailable');
    } finally {
      await closeRedisConnection(broken);
    }
  });
});
