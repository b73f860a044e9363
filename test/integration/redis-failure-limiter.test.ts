import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { RedisFailureLimiter } from '../../src/redis/failure-limiter.ts';
import { freePort } from '../support/gateway-process.ts';
import { privateRedis, redisServerAvailable, type PrivateRedis } from '../support/redis-server.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { describeWithRedis, redisUrl } from '../support/services.ts';
import { until } from '../support/until.ts';

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
    // The other replica, whose memory never saw these failures, and Redis agree the window closes.
    const other = limiter(b, { limit: 2, windowMs: 300 });
    await until(async () => (await other.blockedFor('prefix:Ab3dEf9h')) === 0, 'the window to close');
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

});

/** A command timeout short enough for quick tests; the gateway's default is 500 ms. */
const TIMEOUT_MS = 200;

describe.skipIf(!redisServerAvailable())('RedisFailureLimiter, its Redis hung or late (a redis-server of its own)', () => {
  let redis: PrivateRedis;
  let relay: TcpProxy;
  const connections: Redis[] = [];
  const connect = (port: number, name: string) => {
    const connection = createRedisConnection(`redis://127.0.0.1:${port}`, { name, commandTimeoutMs: TIMEOUT_MS });
    connections.push(connection);
    return connection;
  };
  const limiter = (connection: Redis, limit = 3, onError: (error: unknown) => void = () => {}) =>
    new RedisFailureLimiter({ redis: connection, name: 'login', limit, windowMs: 60_000, onError });
  const whenReady = (...all: Redis[]) => vi.waitFor(() => expect(all.map(({ status }) => status)).toEqual(all.map(() => 'ready')), { timeout: 15_000, interval: 20 });

  beforeAll(async () => {
    redis = await privateRedis();
    await redis.start();
    relay = await startTcpProxy({ host: '127.0.0.1', port: redis.port });
  });
  afterAll(async () => {
    redis.resume();
    await Promise.all(connections.map((connection) => closeRedisConnection(connection)));
    await relay.close();
    await redis.kill();
  });

  it('a stopped Redis (SIGSTOP) is down: every call answers from its own counts, and the count is shared again after SIGCONT', { timeout: 60_000 }, async () => {
    const a = connect(redis.port, 'test:hung-a');
    const b = connect(redis.port, 'test:hung-b');
    await whenReady(a, b);
    const [one, two] = [limiter(a), limiter(b)];
    redis.pause();
    try {
      // A burst while Redis is hung: every call answers, and this replica's own count bounds it.
      const waits = await Promise.all(Array.from({ length: 50 }, () => one.reserve(['email:hung@example.test'])));
      expect(waits.filter((wait) => wait === 0)).toHaveLength(3);
      expect(await one.blockedFor('email:hung@example.test')).toBeGreaterThan(0);
      // The connection was dropped as dead: later calls do not wait on it.
      await vi.waitFor(() => expect(a.status).not.toBe('ready'), { timeout: 10_000, interval: 20 });
      // The other replica saw none of it and Redis cannot tell it: its own count alone, at the full limit.
      expect(await two.reserve(['email:other@example.test'])).toBe(0);
    } finally {
      redis.resume();
    }
    await whenReady(a, b);
    await Promise.all([0, 1].map((i) => one.recordFailure(`email:after-${i}@example.test`)));
    for (let i = 0; i < 3; i++) await one.recordFailure('email:after@example.test');
    // Shared again: the other replica's memory never saw these failures.
    expect(await two.blockedFor('email:after@example.test')).toBeGreaterThan(0);
  });

  it('an event loop busy for longer than the timeout does not take a Redis that answered for down', async () => {
    const busy = connect(redis.port, 'test:busy');
    await whenReady(busy);
    const errors: unknown[] = [];
    const pending = limiter(busy, 3, (error) => errors.push(error)).reserve(['email:busy@example.test']);
    // Redis answers at once; this process reads the answer only after the loop is free again.
    const until = performance.now() + TIMEOUT_MS * 2;
    while (performance.now() < until) {
      // Blocking on purpose: the burst a limiter exists for does this to its event loop.
    }
    expect(await pending).toBe(0);
    // Its answer was taken, not given up on: no error, the connection kept.
    expect(errors).toEqual([]);
    expect(busy.status).toBe('ready');
    // Counted in Redis, not only here: a replica that never saw it finds the subject at a limit of 1.
    const other = connect(redis.port, 'test:busy-other');
    await whenReady(other);
    expect(await limiter(other, 1).blockedFor('email:busy@example.test')).toBeGreaterThan(0);
  });

  it('a Redis that answers later than the command timeout (a delaying relay) is down too, and up again once it answers in time', { timeout: 60_000 }, async () => {
    const late = connect(relay.port, 'test:late');
    const direct = connect(redis.port, 'test:direct');
    await whenReady(late, direct);
    const slow = limiter(late);
    relay.delayReplies(TIMEOUT_MS * 3);
    const waits = await Promise.all(Array.from({ length: 20 }, () => slow.reserve(['email:late@example.test'])));
    expect(waits.filter((wait) => wait === 0)).toHaveLength(3);
    await vi.waitFor(() => expect(late.status).not.toBe('ready'), { timeout: 10_000, interval: 20 });
    // A reconnection whose ready check is answered late does not count as up.
    expect(late.status).not.toBe('ready');
    relay.delayReplies(0);
    await whenReady(late);
    for (let i = 0; i < 3; i++) await slow.recordFailure('email:late-after@example.test');
    expect(await limiter(direct).blockedFor('email:late-after@example.test')).toBeGreaterThan(0);
  });
});
