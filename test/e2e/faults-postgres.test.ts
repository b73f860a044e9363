import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { metric, readyz, startReplicas, useKey, waitForRedis } from '../support/replicas.ts';
import { createTestDatabase, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

/**
 * PostgreSQL goes away under two replicas (its connection runs through a relay the test
 * cuts): keys whose state is cached and fresh keep working, anything that needs the store
 * is refused with 503 `store_unavailable`, never allowed, and everything comes back with it.
 */
describe.skipIf(postgresUrl() === null || redisUrl() === null)('fault: PostgreSQL unreachable', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let origin: Origin;
  let replicas: GatewayProcess[];
  let admin: string;
  let warm: { key: string; id: number };
  let cold: { key: string; id: number };

  beforeAll(async () => {
    database = await createTestDatabase();
    const direct = new URL(database.url);
    proxy = await startTcpProxy({ host: direct.hostname, port: Number(direct.port || 5432) });
    const relayed = new URL(database.url);
    relayed.hostname = '127.0.0.1';
    relayed.port = String(proxy.port);
    origin = await startOrigin();
    replicas = await startReplicas(2, {
      DATABASE_URL: relayed.toString(),
      REDIS_URL: redisUrl()!,
      UPSTREAM_URL: origin.url,
      LOG_LEVEL: 'error',
    });
    await waitForRedis(replicas, 'ok');
    admin = await loginAdmin(replicas[0]!.url);
    const made = async (name: string) => {
      const response = await createKey(replicas[0]!.url, admin, { name, scopes: ['events:write'] });
      expect(response.status).toBe(201);
      return { key: response.body.key as string, id: response.body.id as number };
    };
    warm = await made('warm');
    cold = await made('cold');
    for (const replica of replicas) expect((await useKey(replica, warm.key)).status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await proxy?.restore();
    await Promise.all((replicas ?? []).map((replica) => replica.stop()));
    await origin?.close();
    await proxy?.close();
    await database?.drop();
  });

  it('while it is away: cached keys work, uncached keys and key management answer 503, nothing is allowed unverified, /readyz 200 degraded', async () => {
    await proxy.cut();

    for (let i = 0; i < 3; i++) {
      for (const replica of replicas) expect(await useKey(replica, warm.key)).toMatchObject({ status: 200 });
    }
    for (const replica of replicas) {
      expect(await useKey(replica, cold.key)).toMatchObject({ status: 503, code: 'store_unavailable' });

      const listed = await request(`${replica.url}/api/v1/api-keys`, { token: admin });
      expect([listed.status, listed.body.code]).toEqual([503, 'store_unavailable']);
      expect(listed.headers.get('content-type')).toContain('application/problem+json');
      const created = await createKey(replica.url, admin, { name: 'during outage', scopes: ['events:write'] });
      expect([created.status, created.body.code]).toEqual([503, 'store_unavailable']);
      const deleted = await request(`${replica.url}/api/v1/api-keys/${warm.id}`, { method: 'DELETE', token: admin });
      expect([deleted.status, deleted.body.code]).toEqual([503, 'store_unavailable']);
      const login = await request(`${replica.url}/api/v1/auth/login`, { method: 'POST', json: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
      expect([login.status, login.body.code]).toEqual([503, 'store_unavailable']);

      // An admin token is verified in-process: the admin's proxied routes still work.
      const proxied = await request(`${replica.url}/dashboard/overview`, { token: admin });
      expect(proxied.status).toBe(200);

      // Still ready: the caches decide (docs/monitoring.md, "Health and readiness"); /healthz never asks the store.
      const ready = await readyz(replica);
      expect(ready.status).toBe(200);
      expect(ready.body).toMatchObject({ status: 'degraded', down: ['store'], checks: { store: { status: 'down' } } });
      expect((await request(`${replica.opsUrl}/healthz`)).status).toBe(200);
      expect(await metric(replica, 'gatehouse_dependency_up', { dependency: 'store' })).toBe(0);
    }
    // The refused DELETE did not revoke the key.
    for (const replica of replicas) expect((await useKey(replica, warm.key)).status).toBe(200);
  });

  it('once it is back: everything works again, and nothing ever failed open', async () => {
    await proxy.restore();
    for (const replica of replicas) {
      await expect.poll(async () => (await useKey(replica, cold.key)).status, { timeout: 10_000 }).toBe(200);
      expect((await request(`${replica.url}/api/v1/api-keys`, { token: admin })).status).toBe(200);
      expect(await readyz(replica)).toMatchObject({ status: 200, body: { status: 'ready', down: [] } });
      expect(await metric(replica, 'gatehouse_dependency_up', { dependency: 'store' })).toBe(1);
    }
    expect((await request(`${replicas[1]!.url}/api/v1/api-keys/${warm.id}`, { method: 'DELETE', token: admin })).status).toBe(204);
    for (const replica of replicas) expect(await useKey(replica, warm.key)).toMatchObject({ status: 401, code: 'revoked_credential' });
    for (const replica of replicas) expect(await metric(replica, 'gatehouse_fail_open_decisions_total')).toBe(0);
  });
});
