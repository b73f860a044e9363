import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { freePort, startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { EVENTS_PATH, metric, readyz, useKey, waitForRedis } from '../support/replicas.ts';
import { createTestDatabase, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

/** The address of `url` with its host and port replaced by the relay's. */
function through(url: string, relay: TcpProxy): string {
  const relayed = new URL(url);
  relayed.host = `127.0.0.1:${relay.port}`;
  return relayed.toString();
}

/**
 * /readyz as docs/monitoring.md ("Health and readiness") states it: 503 while starting; 200
 * `degraded`, naming the store, while PostgreSQL is away and the caches decide; 503
 * `unavailable` only once no credential can be accepted from memory either (the store down and
 * the revocation channel lost: cached states dropped, admin sessions unsure); 200 `ready` again
 * once the store is back. /healthz answers
 * 200 all along. PostgreSQL and Redis are cut through relays (the shared servers are never touched).
 */
describe.skipIf(postgresUrl() === null || redisUrl() === null)('readiness through store and Redis faults', () => {
  let database: TestDatabase;
  let postgresRelay: TcpProxy;
  let redisRelay: TcpProxy;
  let origin: Origin;
  let gateway: GatewayProcess;
  let warm: string;

  const healthz = async () => (await request(`${gateway.opsUrl}/healthz`)).status;
  /** A request with the cached key and a body of its own; resolves with the status and whether the upstream received that body. */
  const forwarded = async () => {
    const marker = randomUUID();
    const response = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: warm, json: { marker } });
    return { status: response.status, code: response.body?.code, received: origin.receivedAt(EVENTS_PATH).some((seen) => seen.body.includes(marker)) };
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    const postgres = new URL(database.url);
    postgresRelay = await startTcpProxy({ host: postgres.hostname, port: Number(postgres.port || 5432) });
    const redis = new URL(redisUrl()!);
    redisRelay = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
    origin = await startOrigin();
  });
  afterAll(async () => {
    await postgresRelay?.restore();
    await gateway?.stop();
    await origin?.close();
    await postgresRelay?.close();
    await redisRelay?.close();
    await database?.drop();
  });

  it('answers 503 `starting` while the store is being opened, /healthz 200, and 200 `ready` once it listens', async () => {
    // PostgreSQL accepts the connection and says nothing: the start waits on it.
    postgresRelay.hold();
    const opsPort = await freePort();
    const started = startGateway({
      DATABASE_URL: through(database.url, postgresRelay),
      REDIS_URL: through(redisUrl()!, redisRelay),
      UPSTREAM_URL: origin.url,
      OPS_PORT: String(opsPort),
      LOG_LEVEL: 'warn',
    });
    const opsUrl = `http://127.0.0.1:${opsPort}`;
    await vi.waitFor(
      async () => {
        const starting = await request(`${opsUrl}/readyz`);
        expect([starting.status, starting.body.status]).toEqual([503, 'starting']);
      },
      // As long as startGateway() would wait: loading the modules takes seconds on a busy machine.
      { timeout: 60_000, interval: 50 },
    );
    expect((await request(`${opsUrl}/healthz`)).status).toBe(200);
    expect((await request(`${opsUrl}/metrics`)).status).toBe(503);
    postgresRelay.release();

    gateway = await started;
    const ready = await readyz(gateway);
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: 'ready', down: [], checks: { store: { status: 'ok', kind: 'postgres' } } });
    await waitForRedis([gateway], 'ok');
    expect(await metric(gateway, 'gatehouse_dependency_up', { dependency: 'store' })).toBe(1);

    const admin = await loginAdmin(gateway.url);
    const created = await createKey(gateway.url, admin, { name: 'warm', scopes: ['events:write'] });
    expect(created.status).toBe(201);
    warm = created.body.key as string;
    expect(await forwarded()).toMatchObject({ status: 200, received: true });
  }, 120_000);

  it('PostgreSQL away: 200 `degraded` naming the store, the cached key still forwarded, the store metric 0', async () => {
    await postgresRelay.cut();

    const degraded = await readyz(gateway);
    expect(degraded.status).toBe(200);
    expect(degraded.body).toMatchObject({
      status: 'degraded',
      down: ['store'],
      checks: { store: { status: 'down', kind: 'postgres' }, redis: { status: 'ok' }, memory: { keys: true, admin_sessions: true } },
    });
    expect(await forwarded()).toEqual({ status: 200, code: undefined, received: true });
    expect(await metric(gateway, 'gatehouse_dependency_up', { dependency: 'store' })).toBe(0);
    expect(await healthz()).toBe(200);
  });

  it('Redis lost too: 503 `unavailable`, for no key can be accepted from memory; /healthz still 200', async () => {
    await redisRelay.cut();

    await vi.waitFor(
      async () => {
        const unavailable = await readyz(gateway);
        expect([unavailable.status, unavailable.body.status, unavailable.body.down]).toEqual([503, 'unavailable', ['store', 'redis']]);
      },
      { timeout: 15_000, interval: 50 },
    );
    // What the definition says: the cached key is no longer accepted from memory, and nothing reaches the upstream.
    expect(await forwarded()).toEqual({ status: 503, code: 'store_unavailable', received: false });
    expect(await healthz()).toBe(200);

    // Redis back, the store still away: the channel's return drops every cached state (a revocation
    // may have been missed) and the ended sessions cannot be read again, so still nothing to accept.
    await redisRelay.restore();
    await waitForRedis([gateway], 'ok');
    const still = await readyz(gateway);
    expect([still.status, still.body.status, still.body.down]).toEqual([503, 'unavailable', ['store']]);
    expect(still.body.checks.memory).toEqual({ keys: false, admin_sessions: false });
    expect(await forwarded()).toEqual({ status: 503, code: 'store_unavailable', received: false });
  }, 40_000);

  it('PostgreSQL back: 200 `ready`, the store metric 1, keys verified from the store again', async () => {
    await postgresRelay.restore();

    await vi.waitFor(
      async () => {
        const ready = await readyz(gateway);
        expect([ready.status, ready.body.status, ready.body.down]).toEqual([200, 'ready', []]);
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(await metric(gateway, 'gatehouse_dependency_up', { dependency: 'store' })).toBe(1);
    // The revocation channel's loss dropped every cached state: this one is read from the store.
    expect(await forwarded()).toEqual({ status: 200, code: undefined, received: true });
    expect(await useKey(gateway, warm)).toMatchObject({ status: 200 });
  });
});
