import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request, type JsonResponse } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { privateRedis, redisServerAvailable, type PrivateRedis } from '../support/redis-server.ts';
import { metric, readyz, startReplicas, useKey, waitForRedis } from '../support/replicas.ts';
import { createTestDatabase, postgresUrl, type TestDatabase } from '../support/services.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { until } from '../support/until.ts';

interface Deployment {
  database: TestDatabase;
  redis: PrivateRedis;
  /** Between the replicas and Redis, when asked for: it can hold Redis's answers back. */
  relay: TcpProxy | undefined;
  origin: Origin;
  replicas: GatewayProcess[];
  admin: string;
  /** What each replica was started with (ports excepted). */
  env: Record<string, string>;
  create(name: string, on?: GatewayProcess): Promise<{ key: string; id: number }>;
  revoke(id: number, on: GatewayProcess): Promise<JsonResponse>;
  close(): Promise<void>;
}

/** `count` replicas on a fresh database and a private redis-server (started or not) that the test kills and restarts. */
async function deploy(count: number, options: { redisRunning: boolean; relay?: boolean }): Promise<Deployment> {
  const database = await createTestDatabase();
  const redis = await privateRedis();
  if (options.redisRunning) await redis.start();
  const relay = options.relay === true ? await startTcpProxy({ host: '127.0.0.1', port: redis.port }) : undefined;
  const origin = await startOrigin();
  const redisUrl = relay === undefined ? redis.url : `redis://127.0.0.1:${relay.port}`;
  const env = { DATABASE_URL: database.url, REDIS_URL: redisUrl, UPSTREAM_URL: origin.url, LOG_LEVEL: 'error' };
  const replicas = await startReplicas(count, env);
  const admin = await loginAdmin(replicas[0]!.url);
  return {
    database,
    redis,
    relay,
    origin,
    replicas,
    admin,
    env,
    async create(name, on = replicas[0]!) {
      const response = await createKey(on.url, admin, { name, scopes: ['events:write'] });
      expect(response.status, response.text).toBe(201);
      return { key: response.body.key as string, id: response.body.id as number };
    },
    revoke: (id, on) => request(`${on.url}/api/v1/api-keys/${id}`, { method: 'DELETE', token: admin }),
    async close() {
      await Promise.all(replicas.map((replica) => replica.stop()));
      await origin.close();
      await relay?.close();
      await redis.kill();
      await database.drop();
    },
  };
}

/** Needs PostgreSQL (shared by the replicas) and a redis-server binary (a Redis of their own, to kill). */
const describeWithServices = (name: string, fn: () => void) => describe.skipIf(postgresUrl() === null || !redisServerAvailable())(name, fn);

async function expectRefusedEverywhere(replicas: GatewayProcess[], key: string): Promise<void> {
  const uses = await Promise.all(replicas.map((replica) => useKey(replica, key)));
  expect(uses.map(({ status, code }) => ({ status, code }))).toEqual(replicas.map(() => ({ status: 401, code: 'revoked_credential' })));
}

async function revokedInStore(databaseUrl: string, id: number): Promise<boolean> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM api_keys WHERE id = $1', [id]);
    return rows[0]?.revoked_at != null;
  } finally {
    await client.end();
  }
}

async function expectNoFailOpen(replicas: GatewayProcess[]): Promise<void> {
  for (const replica of replicas) expect(await metric(replica, 'gatehouse_fail_open_decisions_total')).toBe(0);
}

describeWithServices('fault: Redis down at start', () => {
  let d: Deployment;
  beforeAll(async () => {
    d = await deploy(2, { redisRunning: false });
  }, 120_000);
  afterAll(() => d?.close());

  it('starts, serves, and reports Redis degraded in /readyz and the redis metric', async () => {
    for (const replica of d.replicas) {
      const ready = await readyz(replica);
      expect(ready.status).toBe(200);
      expect(ready.body).toMatchObject({ status: 'degraded', down: ['redis'] });
      expect(ready.body.checks.redis).toEqual({ status: 'degraded', connected: false, subscribed: false });
      expect(await metric(replica, 'gatehouse_dependency_up', { dependency: 'redis' })).toBe(0);
    }
  });

  it('keeps every guarantee through the store: keys work on all replicas, state is never cached, a revocation is effective everywhere at once', async () => {
    const { key, id } = await d.create('degraded');
    for (const replica of d.replicas) {
      const missesBefore = await metric(replica, 'gatehouse_cache_lookups_total', { tier: 'state', result: 'miss' });
      for (let i = 0; i < 3; i++) expect((await useKey(replica, key)).status).toBe(200);
      // Degraded: the state is read from the store on every request.
      expect(await metric(replica, 'gatehouse_cache_lookups_total', { tier: 'state', result: 'miss' })).toBe(missesBefore + 3);
    }
    // Stored, but the other replicas could not be told through Redis: not confirmed with a 204.
    const deleted = await d.revoke(id, d.replicas[0]!);
    expect([deleted.status, deleted.body.code]).toEqual([503, 'store_unavailable']);
    await expectRefusedEverywhere(d.replicas, key);
    // Retried once Redis is back, the DELETE confirms.
    await d.redis.start();
    await waitForRedis(d.replicas, 'ok');
    expect((await d.revoke(id, d.replicas[1]!)).status).toBe(204);
  });

  it('once Redis is up: reports it, caches again, and revokes through the barrier', async () => {
    for (const replica of d.replicas) {
      expect((await readyz(replica)).body.checks.redis).toEqual({ status: 'ok', connected: true, subscribed: true });
      expect(await metric(replica, 'gatehouse_dependency_up', { dependency: 'redis' })).toBe(1);
    }
    const { key, id } = await d.create('after recovery', d.replicas[1]);
    for (const replica of d.replicas) {
      expect((await useKey(replica, key)).status).toBe(200);
      const hitsBefore = await metric(replica, 'gatehouse_cache_lookups_total', { tier: 'state', result: 'hit' });
      expect((await useKey(replica, key)).status).toBe(200);
      expect(await metric(replica, 'gatehouse_cache_lookups_total', { tier: 'state', result: 'hit' })).toBe(hitsBefore + 1);
    }
    expect((await d.revoke(id, d.replicas[0]!)).status).toBe(204);
    await expectRefusedEverywhere(d.replicas, key);
    await expectNoFailOpen(d.replicas);
  });
});

describeWithServices('fault: Redis lost mid-traffic and back', () => {
  let d: Deployment;
  beforeAll(async () => {
    d = await deploy(3, { redisRunning: true });
    await waitForRedis(d.replicas, 'ok');
  }, 120_000);
  afterAll(() => d?.close());

  it('no 5xx and no refusal for a cached key, no stale acceptance of a revoked one, before, during and after', async () => {
    const steady = await d.create('steady');
    const revokedDuring = await d.create('revoked during the outage');
    const revokedAfter = await d.create('revoked after the outage');
    for (const { key } of [steady, revokedDuring, revokedAfter]) {
      for (const replica of d.replicas) expect((await useKey(replica, key)).status).toBe(200);
    }

    const failures: string[] = [];
    let requests = 0;
    let running = true;
    const traffic = d.replicas.map(async (replica, index) => {
      while (running) {
        const use = await useKey(replica, steady.key);
        requests++;
        if (use.status !== 200) failures.push(`replica ${index}: ${use.status} ${use.code}`);
      }
    });

    await d.redis.kill();
    await waitForRedis(d.replicas, 'degraded');
    const deleted = await d.revoke(revokedDuring.id, d.replicas[0]!);
    expect([deleted.status, deleted.body.code]).toEqual([503, 'store_unavailable']);
    await expectRefusedEverywhere(d.replicas, revokedDuring.key);

    await d.redis.start();
    await waitForRedis(d.replicas, 'ok');
    expect((await d.revoke(revokedAfter.id, d.replicas[2]!)).status).toBe(204);
    await expectRefusedEverywhere(d.replicas, revokedAfter.key);
    await expectRefusedEverywhere(d.replicas, revokedDuring.key);

    running = false;
    await Promise.all(traffic);
    expect(failures).toEqual([]);
    expect(requests).toBeGreaterThan(30);
    await expectNoFailOpen(d.replicas);
  });
});

describeWithServices('fault: a replica killed with SIGKILL mid-revoke', () => {
  let d: Deployment;
  beforeAll(async () => {
    d = await deploy(3, { redisRunning: true });
    await waitForRedis(d.replicas, 'ok');
  }, 120_000);
  afterAll(() => d?.close());

  it('a replica that dies before acknowledging is counted as missed; the others are correct when 204 arrives', async () => {
    const [a, b, c] = d.replicas as [GatewayProcess, GatewayProcess, GatewayProcess];
    const { key, id } = await d.create('killed mid-revoke');
    for (const replica of d.replicas) expect((await useKey(replica, key)).status).toBe(200);

    // Frozen, c is still subscribed (PUBLISH counts it) but cannot acknowledge; it dies during the barrier.
    c.child.kill('SIGSTOP');
    const deleting = d.revoke(id, a);
    // b drops the key when the barrier's announcement reaches it: from then on the barrier waits for c.
    await until(async () => (await useKey(b, key)).status !== 200, 'b to hear the revocation');
    await c.kill();
    const deleted = await deleting;
    expect(deleted.status).toBe(204);
    await expectRefusedEverywhere([a, b], key);
    expect(await metric(a, 'gatehouse_revocation_barrier_missed_replicas_total')).toBe(1);

    // Without c, a barrier is quick and complete again.
    const next = await d.create('after the kill', b);
    for (const replica of [a, b]) expect((await useKey(replica, next.key)).status).toBe(200);
    expect((await d.revoke(next.id, b)).status).toBe(204);
    await expectRefusedEverywhere([a, b], next.key);
    expect(await metric(b, 'gatehouse_revocation_barrier_missed_replicas_total')).toBe(0);
    await expectNoFailOpen([a, b]);
  });

  it('when the revoking replica dies mid-barrier, the others still drop the key, and a retried DELETE confirms it', async () => {
    const [a, b] = d.replicas as [GatewayProcess, GatewayProcess];
    const { key, id } = await d.create('revoker killed', a);
    for (const replica of [a, b]) expect((await useKey(replica, key)).status).toBe(200);
    // A third replica revokes; b is frozen, so the barrier is still waiting for it when the revoker dies.
    const [doomed] = await startReplicas(1, d.env);
    await waitForRedis([doomed!], 'ok');
    b.child.kill('SIGSTOP');
    try {
      const deleting = d.revoke(id, doomed!).then(
        (response) => response.status,
        () => 'no answer',
      );
      await expect.poll(() => revokedInStore(d.database.url, id), { timeout: 5_000, interval: 10 }).toBe(true);
      await doomed!.kill();
      expect(await deleting).toBe('no answer');
    } finally {
      b.child.kill('SIGCONT');
      await doomed!.kill();
    }
    // The change was published before the revoker died: b drops the key as soon as it runs again.
    await expect.poll(async () => (await useKey(b, key)).code, { timeout: 5_000 }).toBe('revoked_credential');
    await expectRefusedEverywhere([a, b], key);
    // No 204 was given, so nothing was promised; the admin retries, and that answer holds everywhere.
    expect((await d.revoke(id, b)).status).toBe(204);
    await expectRefusedEverywhere([a, b], key);
  });
});

/** A key limited far above what the test sends: every refusal would be a limit applied below its figure. */
const GENEROUS_LIMIT = { requests: 100_000, per_seconds: 60 };

async function limitedKey(d: Deployment, name: string, rateLimit: { requests: number; per_seconds: number }): Promise<string> {
  const response = await createKey(d.replicas[0]!.url, d.admin, { name, scopes: ['events:write'], rate_limit: rateLimit });
  expect(response.status, response.text).toBe(201);
  return response.body.key as string;
}

const fallbacks = async (replicas: GatewayProcess[]) => Promise.all(replicas.map((replica) => metric(replica, 'gatehouse_rate_limit_fallback_total')));

/** Each replica sending with `key`, one request after another, until stopped; every answer kept. */
function steadyTraffic(replicas: GatewayProcess[], key: string) {
  const answers = replicas.map(() => [] as string[]);
  let running = true;
  const senders = replicas.map(async (replica, index) => {
    while (running) {
      const use = await useKey(replica, key);
      answers[index]!.push(use.status === 200 ? '200' : `${use.status} ${use.code}`);
    }
  });
  return {
    answers,
    count: () => answers.reduce((sum, each) => sum + each.length, 0),
    stop: async () => {
      running = false;
      await Promise.all(senders);
    },
  };
}

/** Shared again: a limit of 10 a minute used on every replica admits 10 in all, not 10 on each. */
async function expectSharedCount(d: Deployment, name: string): Promise<void> {
  const key = await limitedKey(d, name, { requests: 10, per_seconds: 60 });
  const uses = [];
  for (let i = 0; i < 30; i++) uses.push(await useKey(d.replicas[i % d.replicas.length]!, key));
  expect(uses.filter(({ status }) => status === 200)).toHaveLength(10);
  expect(uses.filter(({ status }) => status !== 200).every(({ status, code }) => status === 429 && code === 'rate_limited')).toBe(true);
}

describeWithServices('fault: Redis hung (SIGSTOP), then running again (SIGCONT)', () => {
  let d: Deployment;
  beforeAll(async () => {
    d = await deploy(2, { redisRunning: true });
    await waitForRedis(d.replicas, 'ok');
  }, 120_000);
  afterAll(async () => {
    d?.redis.resume();
    await d?.close();
  });

  it('a rate-limited key is never refused below its limit: each replica counts alone, counted as fallback; a change is not confirmed; shared again after', { timeout: 120_000 }, async () => {
    const key = await limitedKey(d, 'limited, hung Redis', GENEROUS_LIMIT);
    const revoked = await d.create('revoked while Redis is hung');
    for (const replica of d.replicas) expect((await useKey(replica, key)).status).toBe(200);
    const fallbacksBefore = await fallbacks(d.replicas);
    const traffic = steadyTraffic(d.replicas, key);
    try {
      await vi.waitFor(() => expect(traffic.count()).toBeGreaterThan(20), { timeout: 30_000 });
      d.redis.pause();
      const atPause = traffic.answers.map((each) => each.length);
      // Answers keep coming on every replica, each counted by that replica alone.
      await vi.waitFor(
        async () => {
          expect(traffic.answers.map((each, i) => each.length - atPause[i]!).every((count) => count >= 20)).toBe(true);
          const now = await fallbacks(d.replicas);
          expect(now.every((count, i) => count > fallbacksBefore[i]!)).toBe(true);
        },
        { timeout: 60_000, interval: 100 },
      );
      await waitForRedis(d.replicas, 'degraded', 30_000);
      // A change that cannot be confirmed through Redis is not: stored, refused everywhere, answered 503.
      const deleted = await d.revoke(revoked.id, d.replicas[0]!);
      expect([deleted.status, deleted.body.code]).toEqual([503, 'store_unavailable']);
      await expectRefusedEverywhere(d.replicas, revoked.key);
    } finally {
      d.redis.resume();
    }
    await waitForRedis(d.replicas, 'ok', 30_000);
    await traffic.stop();
    expect(traffic.answers.flat().filter((answer) => answer !== '200')).toEqual([]);
    // Shared again: no request is counted alone any more, and a small limit holds across both replicas.
    const afterRecovery = await fallbacks(d.replicas);
    for (const replica of d.replicas) expect((await useKey(replica, key)).status).toBe(200);
    expect(await fallbacks(d.replicas)).toEqual(afterRecovery);
    await expectSharedCount(d, 'shared after SIGCONT');
    await expectNoFailOpen(d.replicas);
  });
});

describeWithServices('fault: Redis answering later than REDIS_COMMAND_TIMEOUT', () => {
  let d: Deployment;
  beforeAll(async () => {
    d = await deploy(2, { redisRunning: true, relay: true });
    await waitForRedis(d.replicas, 'ok');
  }, 120_000);
  afterAll(() => d?.close());

  it('is down: a rate-limited key is served, counted alone and as fallback; once Redis answers in time, shared again', { timeout: 120_000 }, async () => {
    const key = await limitedKey(d, 'limited, late Redis', GENEROUS_LIMIT);
    for (const replica of d.replicas) expect((await useKey(replica, key)).status).toBe(200);
    const fallbacksBefore = await fallbacks(d.replicas);
    const traffic = steadyTraffic(d.replicas, key);
    try {
      await vi.waitFor(() => expect(traffic.count()).toBeGreaterThan(20), { timeout: 30_000 });
      // Three times the default timeout of 500 ms: every answer, the ready check's too, comes too late.
      d.relay!.delayReplies(1_500);
      const atDelay = traffic.count();
      await vi.waitFor(
        async () => {
          expect(traffic.count() - atDelay).toBeGreaterThan(40);
          const now = await fallbacks(d.replicas);
          expect(now.every((count, i) => count > fallbacksBefore[i]!)).toBe(true);
        },
        { timeout: 60_000, interval: 100 },
      );
      await waitForRedis(d.replicas, 'degraded', 30_000);
    } finally {
      d.relay!.delayReplies(0);
    }
    await waitForRedis(d.replicas, 'ok', 30_000);
    await traffic.stop();
    expect(traffic.answers.flat().filter((answer) => answer !== '200')).toEqual([]);
    await expectSharedCount(d, 'shared once Redis answers in time');
    await expectNoFailOpen(d.replicas);
  });
});
