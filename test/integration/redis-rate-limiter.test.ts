import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Charge, Counted } from '../../src/policy/rate-limits.ts';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { SharedRateLimiter } from '../../src/redis/shared-rate-limiter.ts';
import { freePort } from '../support/gateway-process.ts';
import { describeWithRedis, redisUrl } from '../support/services.ts';
import { densest } from '../support/intervals.ts';
import { until } from '../support/until.ts';

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

const keyCharge = (keyId: number, requests: number, perSeconds: number): Charge => ({ limit: 'key', keyId, tool: undefined, rule: { requests, perSeconds }, times: 1 });

describeWithRedis('SharedRateLimiter: one count for every replica, through Redis', () => {
  const prefix = `gh-test-${randomBytes(4).toString('hex')}:`;
  const connections: Redis[] = [];
  let replicas: SharedRateLimiter[];
  let keyId = 0;
  const fallbacks: number[] = [0, 0, 0];

  beforeAll(async () => {
    // Three connections: three replicas.
    for (let i = 0; i < 3; i++) connections.push(createRedisConnection(redisUrl()!, { name: `test:rate-${i}` }));
    await Promise.all(connections.map(ready));
    replicas = connections.map((redis, i) => new SharedRateLimiter({ redis, prefix, replicaId: `r${i}`, observe: { fallback: () => void fallbacks[i]!++ } }));
  });
  afterAll(async () => {
    for (const replica of replicas) replica.close();
    const keys = await connections[0]!.keys(`${prefix}*`);
    if (keys.length > 0) await connections[0]!.del(...keys);
    await Promise.all(connections.map(closeRedisConnection));
  });

  it('600 concurrent requests spread over three replicas, a limit of 100 a minute: exactly 100 admitted', async () => {
    const charge = keyCharge(++keyId, 100, 60);
    const answers = await Promise.all(Array.from({ length: 600 }, (_, i) => replicas[i % 3]!.take([charge])));
    expect(answers.filter((answer) => answer.admitted)).toHaveLength(100);
    const refused = answers.filter((answer): answer is Extract<Counted, { admitted: false }> => !answer.admitted);
    expect(refused).toHaveLength(500);
    for (const answer of refused) {
      expect(answer.retryAfter).toBeGreaterThanOrEqual(1);
      // A slot counts until an interval after the lease that held it could last have used it (a lease is a second at most).
      expect(answer.retryAfter).toBeLessThanOrEqual(62);
    }
    // Still none, asked again from any replica.
    for (const replica of replicas) expect(await replica.take([charge])).toMatchObject({ admitted: false });
    expect(fallbacks).toEqual([0, 0, 0]);
  });

  it('steady overload on three replicas: never more than the limit in any interval, and at least 90% of it admitted', async () => {
    const charge = keyCharge(++keyId, 40, 1);
    const admitted: number[] = [];
    const started = performance.now();
    const runMs = 4_000;
    // Ten clients per replica, each asking again as soon as it is answered (admitted or not).
    const client = async (replica: SharedRateLimiter) => {
      while (performance.now() - started < runMs) {
        const answer = await replica.take([charge]);
        if (answer.admitted) admitted.push(performance.now());
        else await new Promise((resolve) => setImmediate(resolve));
      }
    };
    await Promise.all(replicas.flatMap((replica) => Array.from({ length: 10 }, () => client(replica))));
    admitted.sort((a, b) => a - b);
    // Times are read just after each admission, so two of them can look up to a few ms closer
    // than the admissions were: the interval checked is 15 ms short of a second.
    expect(densest(admitted, 985)).toBeLessThanOrEqual(40);
    expect(admitted.length).toBeGreaterThanOrEqual(0.9 * 40 * (runMs / 1000));
  });

  it('traffic 5% over the limit, spread evenly and steady: at least 90% of the limit admitted once the first interval is past', async () => {
    const charge = keyCharge(++keyId, 60, 1);
    const admitted: number[] = [];
    const started = performance.now();
    const runMs = 7_000;
    // Open loop: each replica is asked 21 times a second, whatever was answered (63 a second against 60).
    const asked: Array<Promise<void>> = [];
    await Promise.all(replicas.map(async (replica, offset) => {
      for (let sent = 0; ; sent++) {
        const due = started + offset * 5 + (sent * 1000) / 21;
        if (due - started > runMs) break;
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
        asked.push(Promise.resolve(replica.take([charge])).then((answer) => {
          if (answer.admitted) admitted.push(performance.now());
        }));
      }
    }));
    // Every answer in, however long the last ones took.
    await Promise.all(asked);
    admitted.sort((a, b) => a - b);
    expect(densest(admitted, 985)).toBeLessThanOrEqual(60);
    const steady = admitted.filter((at) => at - started > 1_000 && at - started <= runMs).length;
    expect(steady).toBeGreaterThanOrEqual(0.9 * 60 * ((runMs - 1_000) / 1_000));
  });

  it('slots a replica leased and did not use go back: another replica gets them', async () => {
    const charge = keyCharge(++keyId, 100, 60);
    const [a, b] = replicas as [SharedRateLimiter, SharedRateLimiter];
    // One at a time: A's leases grow (1, 2, 4, 8, then 10: a tenth of the limit), and it holds unused slots.
    for (let i = 0; i < 19; i++) expect(await a.take([charge])).toMatchObject({ admitted: true });
    // What Redis counts: every entry of the key's one sorted set carries its count (`<name>:<count>`).
    const counted = async () => (await connections[0]!.zrange(`${prefix}rate:k:${keyId}`, '0', '-1')).reduce((sum, member) => sum + Number(member.split(':').at(-1)), 0);
    expect(await counted()).toBeGreaterThan(19);
    // Its lease lapses within a second, and what it did not use stops counting.
    await until(async () => (await counted()) === 19, 'the unused slots to stop counting');
    expect(await counted()).toBe(19);
    const answers = await Promise.all(Array.from({ length: 90 }, () => b.take([charge])));
    expect(answers.filter((answer) => answer.admitted)).toHaveLength(81);
  });

  it('a request\'s charges are counted together: a tool refused uses up nothing of the key\'s limit on any replica', async () => {
    const id = ++keyId;
    const key = keyCharge(id, 5, 60);
    const tool: Charge = { limit: 'tool', keyId: id, tool: 'place_outbound_call', rule: { requests: 2, perSeconds: 60 }, times: 1 };
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => replicas[i % 3]!.take([key, tool])));
    expect(answers.filter((answer) => answer.admitted)).toHaveLength(2);
    const rest = await Promise.all(Array.from({ length: 6 }, (_, i) => replicas[i % 3]!.take([key])));
    expect(rest.filter((answer) => answer.admitted)).toHaveLength(3);
  });

  it('a batch of n counts n on every replica; one needing more than is left is refused whole, counting nothing', async () => {
    const single = keyCharge(++keyId, 10, 60);
    const batch = { ...single, times: 4 };
    expect((await replicas[0]!.take([batch])).admitted).toBe(true);
    expect((await replicas[1]!.take([batch])).admitted).toBe(true);
    const refused = await replicas[2]!.take([batch]);
    expect(refused).toMatchObject({ admitted: false, refused: batch });
    expect(refused.quotas[0]!.resetSeconds).toBeLessThanOrEqual(60);
    // The two left are still there, for requests that fit them: the refused batch took none.
    const rest = await Promise.all(Array.from({ length: 4 }, (_, i) => replicas[i % 3]!.take([single])));
    expect(rest.filter((answer) => answer.admitted)).toHaveLength(2);
    for (const answer of rest) expect(answer.quotas[0]!.resetSeconds).toBeLessThanOrEqual(60);
  });

  it('tells what is left and when more will be', async () => {
    const charge = keyCharge(++keyId, 10, 60);
    const first = await replicas[0]!.take([charge]);
    expect(first).toMatchObject({ admitted: true, quotas: [{ charge }] });
    const [quota] = first.quotas;
    expect(quota!.remaining).toBe(9);
    expect(quota!.resetSeconds).toBeGreaterThan(58);
    expect(quota!.resetSeconds).toBeLessThanOrEqual(60);
  });
});

describe('SharedRateLimiter: Redis out of reach', () => {
  it('counts on this replica alone, at the full limit, and says so', async () => {
    const redis = createRedisConnection(`redis://127.0.0.1:${await freePort()}`, { name: 'test:rate-away' });
    let fallbacks = 0;
    const limiter = new SharedRateLimiter({ redis, replicaId: 'away', observe: { fallback: () => void fallbacks++ } });
    try {
      const charge = keyCharge(1, 3, 60);
      const answers = await Promise.all(Array.from({ length: 5 }, () => limiter.take([charge])));
      expect(answers.map((answer) => answer.admitted)).toEqual([true, true, true, false, false]);
      expect(fallbacks).toBe(5);
      expect(limiter.peek(charge)).toMatchObject({ remaining: 0 });
    } finally {
      limiter.close();
      await closeRedisConnection(redis);
    }
  });
});
