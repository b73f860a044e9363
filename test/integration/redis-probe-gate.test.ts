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
    new RedisProbeGate({ redis, name: 'key_prefix', intervalMs, waitMemoryMs: WAIT_MEMORY_INTERVALS * intervalMs, maxClaimants: MAX_CLAIMANTS, prefix, onError: () => {} });

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
    // One subject's keys, in one hash slot, at most MAX_CLAIMANTS claimants, expiring on their own.
    const keys = await a.keys(`${prefix}probe:key_prefix:*`);
    expect(new Set(keys.map((key) => key.slice(0, key.lastIndexOf(':')))).size).toBe(1);
    expect(keys.every((key) => /\{[\w-]+\}:[a-z]+$/.test(key))).toBe(true);
    const active = keys.find((key) => key.endsWith(':active'))!;
    expect(await a.zcard(active)).toBeLessThanOrEqual(MAX_CLAIMANTS);
    for (const key of keys) expect(await a.pttl(key)).toBeGreaterThan(0);
    await a.del(...keys);
  });

  it('a newcomer behind 100 flooding addresses on two replicas has the first free slot after it asked; the flood one a second', { timeout: 30_000 }, async () => {
    const intervalMs = 400;
    const many = (redis: Redis) => new RedisProbeGate({ redis, name: 'key_prefix', intervalMs, waitMemoryMs: WAIT_MEMORY_INTERVALS * intervalMs, prefix });
    const wide = [many(a), many(b)];
    const subject = `ghk_${randomBytes(4).toString('hex')}`;
    const passes: { at: number; claimant: string }[] = [];
    const ask = async (claimant: string, replica: number) => {
      if (await wide[replica]!.tryPass(subject, claimant)) passes.push({ at: performance.now(), claimant });
    };
    const started = performance.now();
    let newcomerAskedAt = Infinity;
    let round = 0;
    // Rounds of all 100 addresses, half on each replica, until the newcomer has passed (or 20 intervals).
    while (!passes.some(({ claimant }) => claimant === 'newcomer') && performance.now() - started < 20 * intervalMs) {
      await Promise.all(Array.from({ length: 100 }, (_, i) => ask(`10.1.0.${i}`, i % 2)));
      const elapsed = performance.now() - started;
      if (elapsed > 3 * intervalMs && round++ % 4 === 0) {
        newcomerAskedAt = Math.min(newcomerAskedAt, performance.now());
        await ask('newcomer', round % 2);
      }
    }
    const served = passes.findIndex(({ claimant }) => claimant === 'newcomer');
    expect(served, passes.map(({ claimant }) => claimant).join()).toBeGreaterThan(0);
    // No pass went to the flood between the newcomer's first try and its own.
    expect(passes[served - 1]!.at).toBeLessThan(newcomerAskedAt);
    expect(passes.length).toBeLessThanOrEqual(Math.ceil((performance.now() - started) / intervalMs) + 1);
  });

  it('lets one attempt per subject through per interval across replicas, however many ask at once', async () => {
    const replicas = [gate(a), gate(b)];
    const passed = await Promise.all(Array.from({ length: 100 }, (_, i) => replicas[i % 2]!.tryPass('ghk_Ab3dEf9h', `10.0.0.${i % 7}`)));
    expect(passed.filter(Boolean)).toHaveLength(1);
    expect(await replicas[0]!.tryPass('ghk_Zz9yXx8w', '10.0.0.1')).toBe(true);
  });

  it('stores no address and no subject in the clear', async () => {
    const one = gate(a);
    expect(await one.tryPass('ghk_cleartext', '192.0.2.77')).toBe(true);
    expect(await one.tryPass('ghk_cleartext', '192.0.2.78')).toBe(false);
    const keys = await a.keys(`${prefix}*`);
    expect(keys.some((key) => key.includes('ghk_cleartext'))).toBe(false);
    for (const key of keys) {
      const fields = (await a.type(key)) === 'hash' ? await a.hkeys(key) : await a.zrange(key, '0', '-1');
      expect(fields.length).toBeGreaterThan(0);
      expect(fields.some((field) => field.includes('192.0.2.7'))).toBe(false);
    }
  });

  it('with Redis away or too slow (the same: down), each replica lets one through per interval on its own', async () => {
    const dead = createRedisConnection(`redis://127.0.0.1:${await freePort()}`, { name: 'test:probe-dead' });
    try {
      const offline = gate(dead);
      expect([await offline.tryPass('ghk_offline', 'A'), await offline.tryPass('ghk_offline', 'A'), await offline.tryPass('ghk_offline', 'B')]).toEqual([true, false, false]);
    } finally {
      dead.disconnect();
    }
    const late = { status: 'ready', eval: () => Promise.reject(new Error('Command timed out')) } as unknown as Redis;
    const slow = gate(late);
    expect([await slow.tryPass('ghk_late', 'A'), await slow.tryPass('ghk_late', 'B')]).toEqual([true, false]);
  });
});
