import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { DEFAULT_REDIS_PREFIX } from '../../src/redis/identity-tier.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { metric, startReplicas, useKey, waitForRedis } from '../support/replicas.ts';
import { createTestDatabase, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';
import { until } from '../support/until.ts';

const LICENCE = 10;
const ROUNDS = 50;

/**
 * Three gateway processes on one PostgreSQL database and one Redis, as operators run them
 * (a sidecar beside every replica of the platform).
 */
describe.skipIf(postgresUrl() === null || redisUrl() === null)('three replicas on one PostgreSQL and one Redis', () => {
  let database: TestDatabase;
  let origin: Origin;
  let replicas: GatewayProcess[];
  let admin: string;
  let redis: Redis;
  /** The shared identity tier's entries (src/redis/identity-tier.ts), read to tell when a replica's write has landed. */
  const identityEntries = () => redis.keys(`${DEFAULT_REDIS_PREFIX}*identity:*`);

  beforeAll(async () => {
    redis = createRedisConnection(redisUrl()!, { name: 'test:replicas-reader' });
    database = await createTestDatabase();
    origin = await startOrigin();
    replicas = await startReplicas(3, {
      DATABASE_URL: database.url,
      REDIS_URL: redisUrl()!,
      UPSTREAM_URL: origin.url,
      LICENSE_API_KEYS: String(LICENCE),
      LOG_LEVEL: 'warn',
    });
    await waitForRedis(replicas, 'ok');
    admin = await loginAdmin(replicas[0]!.url);
  }, 120_000);
  afterAll(async () => {
    await Promise.all((replicas ?? []).map((replica) => replica.stop()));
    await origin?.close();
    await database?.drop();
    if (redis !== undefined) await closeRedisConnection(redis);
  });

  const create = async (on: GatewayProcess, name: string) => {
    const response = await createKey(on.url, admin, { name, scopes: ['events:write'] });
    expect(response.status, response.text).toBe(201);
    return { key: response.body.key as string, id: response.body.id as number };
  };
  const revoke = (on: GatewayProcess, id: number) => request(`${on.url}/api/v1/api-keys/${id}`, { method: 'DELETE', token: admin });

  it('accepts an admin token issued by one replica on every replica', async () => {
    for (const replica of replicas) {
      const listed = await request(`${replica.url}/api/v1/api-keys`, { token: admin });
      expect(listed.status).toBe(200);
    }
  });

  it(`holds the licence cap under 50 parallel creates spread over the three replicas`, async () => {
    // Which replica wins the places is up to the race: one replica can, now and then, take all
    // of them. The cap must hold in every round; rounds go on until one's winners span replicas.
    const winningReplicas = new Set<number>();
    for (let round = 0; round < 5 && winningReplicas.size < 2; round++) {
      winningReplicas.clear();
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) => createKey(replicas[i % 3]!.url, admin, { name: `parallel ${round}.${i}`, scopes: ['events:write'] })),
      );
      const listed = (await request(`${replicas[2]!.url}/api/v1/api-keys`, { token: admin })).body as Array<{ id: number; is_active: boolean }>;
      const active = listed.filter((record) => record.is_active);
      // Free the places again, for the next round and the tests below, before anything is asserted.
      const revoked = await Promise.all(active.map((record) => revoke(replicas[0]!, record.id)));
      const statuses = responses.map((response) => response.status);
      expect(statuses.filter((status) => status === 201)).toHaveLength(LICENCE);
      expect(statuses.filter((status) => status === 402)).toHaveLength(50 - LICENCE);
      expect(active).toHaveLength(LICENCE);
      expect(revoked.map((response) => response.status)).toEqual(active.map(() => 204));
      responses.forEach((response, i) => {
        if (response.status === 201) winningReplicas.add(i % 3);
      });
    }
    // Created over more than one replica, not just one.
    expect(winningReplicas.size).toBeGreaterThan(1);
  });

  it('verifies a key with argon2id once: the other replicas find it in the shared tier', async () => {
    const { key, id } = await create(replicas[0]!, 'shared tier');
    const argon2Before = await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_argon2_verifications_total')));
    const redisHitsBefore = await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_cache_lookups_total', { tier: 'redis', result: 'hit' })));
    const entriesBefore = new Set(await identityEntries());
    expect((await useKey(replicas[0]!, key)).status).toBe(200);
    // The shared write is not awaited by the request that verified the key: wait for a new entry naming it.
    await until(async () => {
      for (const name of await identityEntries()) {
        if (!entriesBefore.has(name) && (await redis.get(name))?.startsWith(`${id}:`)) return true;
      }
      return false;
    }, 'the shared identity entry');
    expect((await useKey(replicas[1]!, key)).status).toBe(200);
    expect((await useKey(replicas[2]!, key)).status).toBe(200);
    const argon2After = await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_argon2_verifications_total')));
    const redisHitsAfter = await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_cache_lookups_total', { tier: 'redis', result: 'hit' })));
    expect(argon2After.map((after, i) => after - argon2Before[i]!)).toEqual([1, 0, 0]);
    expect(redisHitsAfter.map((after, i) => after - redisHitsBefore[i]!)).toEqual([0, 1, 1]);
    expect((await revoke(replicas[0]!, id)).status).toBe(204);
  });

  it('serves a warm key from each replica\'s own cache (so a missed eviction would show below)', async () => {
    const { key, id } = await create(replicas[1]!, 'warm');
    for (const replica of replicas) expect((await useKey(replica, key)).status).toBe(200);
    const hitsBefore = await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_cache_lookups_total', { tier: 'state', result: 'hit' })));
    const missesBefore = await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_cache_lookups_total', { tier: 'state', result: 'miss' })));
    for (const replica of replicas) expect((await useKey(replica, key)).status).toBe(200);
    const hitsAfter = await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_cache_lookups_total', { tier: 'state', result: 'hit' })));
    const missesAfter = await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_cache_lookups_total', { tier: 'state', result: 'miss' })));
    expect(hitsAfter.map((after, i) => after - hitsBefore[i]!)).toEqual([1, 1, 1]);
    expect(missesAfter.map((after, i) => after - missesBefore[i]!)).toEqual([0, 0, 0]);
    expect((await revoke(replicas[1]!, id)).status).toBe(204);
  });

  it(`${ROUNDS} rounds: a key created on one replica works on all at once; once DELETE answers 204 no replica accepts it`, async () => {
    const stale: string[] = [];
    const unexpected: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const creator = replicas[round % 3]!;
      const revoker = replicas[(round + 1) % 3]!;
      const { key, id } = await create(creator, `round ${round}`);
      // Warm: every replica accepts the new key at once, and caches its state.
      const warm = await Promise.all(replicas.map((replica) => useKey(replica, key)));
      expect(warm.map((use) => use.status)).toEqual([200, 200, 200]);

      // Traffic with the key on every replica while it is revoked.
      let revoked = false;
      let answeredAt = Infinity;
      const traffic = replicas.map(async (replica, index) => {
        while (!revoked) {
          const use = await useKey(replica, key);
          if (use.status === 200 && use.startedAt > answeredAt) stale.push(`round ${round}, replica ${index}, during traffic`);
          if (use.status !== 200 && use.status !== 401) unexpected.push(`round ${round}: ${use.status} ${use.code}`);
        }
      });
      const deleted = await revoke(revoker, id);
      answeredAt = performance.now();
      expect(deleted.status).toBe(204);
      // The moment 204 arrives: the key on every replica, the revoker's included.
      const after = await Promise.all(replicas.map((replica) => useKey(replica, key)));
      revoked = true;
      await Promise.all(traffic);
      after.forEach((use, index) => {
        if (use.status === 200) stale.push(`round ${round}, replica ${index}, right after 204`);
        else expect(use).toMatchObject({ status: 401, code: 'revoked_credential' });
      });
    }
    expect(stale).toEqual([]);
    expect(unexpected).toEqual([]);
  }, 180_000);

  it('no barrier was missed and nothing failed open', async () => {
    for (const replica of replicas) {
      expect(await metric(replica, 'gatehouse_revocation_barrier_missed_replicas_total')).toBe(0);
      expect(await metric(replica, 'gatehouse_fail_open_decisions_total')).toBe(0);
      expect(await metric(replica, 'gatehouse_dependency_up', { dependency: 'redis' })).toBe(1);
    }
    const barriers = await Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_revocation_barrier_duration_seconds_count')));
    expect(barriers.reduce((sum, count) => sum + count, 0)).toBeGreaterThanOrEqual(ROUNDS);
  });

  it('throttles admin logins across replicas: failures on three replicas add up to one limit', async () => {
    const attempt = (on: GatewayProcess) =>
      request(`${on.url}/api/v1/auth/login`, { method: 'POST', json: { email: 'nobody@example.test', password: 'wrong password' } });
    // LOGIN_FAILURE_LIMIT is 10: four failures on each of three replicas pass it, though no replica saw more than four.
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await attempt(replicas[i % 3]!)).status);
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual([429, 429]);
    expect((await attempt(replicas[0]!)).status).toBe(429);
  });
});
