import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { RedisProbeGate } from '../../src/redis/probe-gate.ts';
import { freePort } from '../support/gateway-process.ts';
import { describeWithRedis, redisUrl } from '../support/services.ts';

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

describeWithRedis('RedisProbeGate', () => {
  const prefix = `gh-test-${randomBytes(4).toString('hex')}:`;
  let a: Redis;
  let b: Redis;
  const gate = (redis: Redis, intervalMs = 60_000) => new RedisProbeGate({ redis, name: 'key_prefix', intervalMs, prefix, onError: () => {} });

  beforeAll(async () => {
    // Two connections: two replicas.
    a = createRedisConnection(redisUrl()!, { name: 'test:probe-a' });
    b = createRedisConnection(redisUrl()!, { name: 'test:probe-b' });
    await Promise.all([ready(a), ready(b)]);
  });
  afterAll(async () => {
    const keys = await a.keys(`${prefix}*`);
    if (keys.length > 0) await a.del(...keys);
    await Promise.all([closeRedisConnection(a), closeRedisConnection(b)]);
  });

  it('lets one attempt per subject through per interval across replicas, however many ask at once', async () => {
    const replicas = [gate(a), gate(b)];
    const passed = await Promise.all(Array.from({ length: 100 }, (_, i) => replicas[i % 2]!.tryPass('ghk_Ab3dEf9h')));
    expect(passed.filter(Boolean)).toHaveLength(1);
    expect(await replicas[0]!.tryPass('ghk_Zz9yXx8w')).toBe(true);
  });

  it('opens again after the interval, for the replica that did not pass before', async () => {
    const one = gate(a, 200);
    const two = gate(b, 200);
    expect(await one.tryPass('ghk_interval')).toBe(true);
    expect(await two.tryPass('ghk_interval')).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await two.tryPass('ghk_interval')).toBe(true);
  });

  it('with Redis away, each replica lets one through per interval on its own; a late answer lets none through', async () => {
    const dead = createRedisConnection(`redis://127.0.0.1:${await freePort()}`, { name: 'test:probe-dead' });
    try {
      const offline = gate(dead);
      expect([await offline.tryPass('ghk_offline'), await offline.tryPass('ghk_offline')]).toEqual([true, false]);
    } finally {
      dead.disconnect();
    }
    const late = { set: () => Promise.reject(new Error('Command timed out')) } as unknown as Redis;
    expect(await gate(late).tryPass('ghk_late')).toBe(false);
  });
});
