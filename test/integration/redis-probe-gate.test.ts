import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { RedisProbeGate } from '../../src/redis/probe-gate.ts';
import { freePort } from '../support/gateway-process.ts';
import { MAX_CLAIMANTS, PROBE_CASES, runProbeCase, WAIT_MEMORY_INTERVALS } from '../support/probe-gate-cases.ts';
import { describeWithRedis, redisUrl } from '../support/services.ts';

/** The cases run on Redis's own clock, so in real time: short enough to be quick, long enough for a busy machine's jitter. */
const CASE_INTERVAL_MS = 250;

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

describeWithRedis('RedisProbeGate', () => {
  const prefix = `gh-test-${randomBytes(4).toString('hex')}:`;
  let a: Redis;
  let b: Redis;
  const gate = (redis: Redis, intervalMs = 60_000) =>
    new RedisProbeGate({ redis, name: 'key_prefix', intervalMs, waitMemoryMs: WAIT_MEMORY_INTERVALS * intervalMs, prefix, onError: () => {} });

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

  it.each(PROBE_CASES.map((testCase) => [testCase.name, testCase] as const))('%s (steps alternating between two replicas)', { timeout: 30_000 }, async (_name, testCase) => {
    const replicas = [gate(a, CASE_INTERVAL_MS), gate(b, CASE_INTERVAL_MS)];
    const subject = `ghk_${randomBytes(4).toString('hex')}`;
    const started = performance.now();
    await runProbeCase(
      testCase,
      async (at) => {
        const wait = started + at * CASE_INTERVAL_MS - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      },
      (claimant, index) => replicas[index % 2]!.tryPass(subject, claimant),
    );
    // One hash per subject: the slot and at most MAX_CLAIMANTS claimants, expiring on its own.
    const [key] = await a.keys(`${prefix}probe:key_prefix:*`);
    expect(key).toBeDefined();
    expect(await a.hlen(key!)).toBeLessThanOrEqual(MAX_CLAIMANTS + 1);
    expect(await a.pttl(key!)).toBeGreaterThan(0);
    await a.del(key!);
  });

  it('lets one attempt per subject through per interval across replicas, however many ask at once', async () => {
    const replicas = [gate(a), gate(b)];
    const passed = await Promise.all(Array.from({ length: 100 }, (_, i) => replicas[i % 2]!.tryPass('ghk_Ab3dEf9h', `10.0.0.${i % 7}`)));
    expect(passed.filter(Boolean)).toHaveLength(1);
    expect(await replicas[0]!.tryPass('ghk_Zz9yXx8w', '10.0.0.1')).toBe(true);
  });

  it('stores no address and no subject in the clear', async () => {
    expect(await gate(a).tryPass('ghk_cleartext', '192.0.2.77')).toBe(true);
    const keys = await a.keys(`${prefix}*`);
    expect(keys.some((key) => key.includes('ghk_cleartext'))).toBe(false);
    for (const key of keys) expect((await a.hkeys(key)).some((field) => field.includes('192.0.2.77'))).toBe(false);
  });

  it('with Redis away, each replica lets one through per interval on its own, in turns; a late answer lets none through', async () => {
    const dead = createRedisConnection(`redis://127.0.0.1:${await freePort()}`, { name: 'test:probe-dead' });
    try {
      const offline = gate(dead);
      expect([await offline.tryPass('ghk_offline', 'A'), await offline.tryPass('ghk_offline', 'A'), await offline.tryPass('ghk_offline', 'B')]).toEqual([true, false, false]);
    } finally {
      dead.disconnect();
    }
    const late = { eval: () => Promise.reject(new Error('Command timed out')) } as unknown as Redis;
    expect(await gate(late).tryPass('ghk_late', 'A')).toBe(false);
  });
});
