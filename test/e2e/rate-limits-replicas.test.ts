import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { type Origin } from '../support/origin.ts';
import { EVENTS_PATH, metric, startRelayedReplicas, waitForRedis, type RelayedReplicas } from '../support/replicas.ts';
import { rateLimitField } from '../support/rate-limit-fields.ts';
import { postgresUrl, redisUrl } from '../support/services.ts';
import { type TcpProxy } from '../support/tcp-proxy.ts';
import { densest } from '../support/intervals.ts';

interface Answer {
  status: number;
  retryAfter: string | null;
  rateLimit: string | null;
}

/**
 * The contract of issue 26 (docs/replicas.md, "Rate limits"): with REDIS_URL, the replicas
 * together forward at most a key's limit in any interval, whatever the concurrency, and with
 * traffic spread evenly they admit at least 90% of it. Three replicas on one PostgreSQL and one
 * Redis; replica 0 reaches Redis through a relay the last test cuts. What counts is what the
 * upstream received.
 */
describe.skipIf(postgresUrl() === null || redisUrl() === null)('rate limits on three replicas sharing Redis', () => {
  let set: RelayedReplicas | undefined;
  let origin: Origin;
  let relay: TcpProxy;
  let replicas: GatewayProcess[];
  let admin: string;

  beforeAll(async () => {
    set = await startRelayedReplicas();
    ({ origin, relay, replicas } = set);
    admin = await loginAdmin(replicas[0]!.url);
  }, 120_000);
  afterAll(async () => {
    await set?.close();
  });

  const intervals = new Map<string, number>();
  const perSecondsOf = (key: string) => intervals.get(key)!;
  const limitedKey = async (requests: number, perSeconds: number) => {
    const created = await createKey(replicas[0]!.url, admin, { name: 'shared limit', rate_limit: { requests, per_seconds: perSeconds } });
    expect(created.status, created.text).toBe(201);
    intervals.set(created.body.key as string, perSeconds);
    return created.body.key as string;
  };
  /** One call with `key`, tagged in its body so the upstream's record can be told apart. */
  const use = async (replica: GatewayProcess, key: string, tag: string): Promise<Answer> => {
    const response = await request(`${replica.url}${EVENTS_PATH}`, { method: 'POST', token: key, json: { type: 'limited', tag } });
    if (response.status === 429) expect(response.body.code).toBe('rate_limited');
    // Every answer, admitted or refused, from a lease or from this replica's own count: t within w.
    if (response.status === 200 || response.status === 429) expect(rateLimitField(response.headers).t).toBeLessThanOrEqual(perSecondsOf(key));
    return { status: response.status, retryAfter: response.headers.get('retry-after'), rateLimit: response.headers.get('ratelimit') };
  };
  const arrivals = (tag: string) => origin.received.filter((received) => received.body.includes(`"tag":"${tag}"`));

  it('a key of 100 a minute under 50 concurrent clients spread over the three: the upstream receives exactly 100', async () => {
    const key = await limitedKey(100, 60);
    // Fifty clients, each on one replica in turn, twelve calls each: 600 calls in all.
    const answers = (await Promise.all(Array.from({ length: 50 }, async (_, client) => {
      const replica = replicas[client % 3]!;
      const mine: Answer[] = [];
      for (let call = 0; call < 12; call++) mine.push(await use(replica, key, 'exact'));
      return mine;
    }))).flat();
    expect(arrivals('exact')).toHaveLength(100);
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(100);
    const refused = answers.filter((answer) => answer.status === 429);
    expect(refused).toHaveLength(500);
    for (const answer of refused) {
      expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(answer.rateLimit).toMatch(/^"key";r=0;t=\d+$/);
    }
    // Every replica admitted some: the count is shared, not one replica's.
    expect(await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_rate_limit_fallback_total')))).toEqual([0, 0, 0]);
  });

  it('steady traffic spread evenly: never more than the limit in any interval, and at least 90% of it admitted', async () => {
    const key = await limitedKey(50, 2);
    const runMs = 6_000;
    const started = Date.now();
    await Promise.all(replicas.flatMap((replica) => Array.from({ length: 6 }, async () => {
      while (Date.now() - started < runMs) await use(replica, key, 'steady');
    })));
    const times = arrivals('steady').map((received) => received.arrivedAt).sort((a, b) => a - b);
    // Arrival is read at the upstream, a little after each decision: the interval checked is 100 ms short of two seconds.
    expect(densest(times, 1_900)).toBeLessThanOrEqual(50);
    expect(times.length).toBeGreaterThanOrEqual(0.9 * 50 * (runMs / 2_000));
  });

  it('Redis out of a replica\'s reach: that replica counts alone at the full limit and says so; the others keep sharing', async () => {
    const key = await limitedKey(5, 60);
    await relay.cut();
    try {
      await waitForRedis([replicas[0]!], 'degraded');
      const alone = await Promise.all(Array.from({ length: 10 }, () => use(replicas[0]!, key, 'alone')));
      expect(alone.filter((answer) => answer.status === 200)).toHaveLength(5);
      expect(await metric(replicas[0]!, 'gatehouse_rate_limit_fallback_total')).toBeGreaterThanOrEqual(10);
      const shared = await Promise.all(Array.from({ length: 10 }, (_, i) => use(replicas[1 + (i % 2)]!, key, 'shared')));
      expect(shared.filter((answer) => answer.status === 200)).toHaveLength(5);
      expect(arrivals('alone')).toHaveLength(5);
      expect(arrivals('shared')).toHaveLength(5);
    } finally {
      await relay.restore();
    }
    await waitForRedis([replicas[0]!], 'ok');
  });
});
