import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { createTestDatabase, postgresUrl, type TestDatabase } from '../support/services.ts';

const stores = [
  { name: 'embedded store', postgres: false },
  { name: 'PostgreSQL', postgres: true },
];

describe.each(stores)('licence cap and persistence ($name)', ({ postgres }) => {
  const skip = postgres && postgresUrl() === null;
  let database: TestDatabase | undefined;
  let gateway: GatewayProcess;
  let admin: string;
  const env = (): Record<string, string> => ({ LICENSE_API_KEYS: '5', ...(database ? { DATABASE_URL: database.url } : {}) });

  beforeAll(async () => {
    if (skip) return;
    if (postgres) database = await createTestDatabase();
    gateway = await startGateway(env());
    admin = await loginAdmin(gateway.url);
  });
  afterAll(async () => {
    await gateway?.stop();
    await database?.drop();
  });

  it.skipIf(skip)('50 concurrent creates against a cap of 5 create exactly 5; the rest are 402 with nothing created', async () => {
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) => createKey(gateway.url, admin, { name: `concurrent ${i}` })),
    );
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 201)).toHaveLength(5);
    expect(statuses.filter((status) => status === 402)).toHaveLength(45);
    for (const refused of responses.filter((response) => response.status === 402)) {
      expect(refused.body).toMatchObject({ status: 402, code: 'license_limit' });
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
      expect(refused.body).not.toHaveProperty('key');
    }
    const listed = await request(`${gateway.url}/api/v1/api-keys`, { token: admin });
    expect(listed.body).toHaveLength(5);
    expect(listed.body.every((record: { is_active: boolean }) => record.is_active)).toBe(true);
  });

  it.skipIf(skip)('a revoked key frees its place under the cap', async () => {
    const listed = (await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body;
    expect((await createKey(gateway.url, admin, { name: 'over' })).status).toBe(402);
    const deleted = await request(`${gateway.url}/api/v1/api-keys/${listed[0].id}`, { method: 'DELETE', token: admin });
    expect(deleted.status).toBe(204);
    expect((await createKey(gateway.url, admin, { name: 'in its place' })).status).toBe(201);
    expect((await createKey(gateway.url, admin, { name: 'over again' })).status).toBe(402);
    const after = (await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body;
    expect(after).toHaveLength(6);
    expect(after.filter((record: { status: string }) => record.status === 'revoked')).toHaveLength(1);
  });

  it.skipIf(skip)('keys, their state and the admin token survive a restart', async () => {
    const before = (await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body;
    expect(await gateway.stop()).toBe(0);
    gateway = await startGateway({ ...env(), DATA_DIR: gateway.env.DATA_DIR! });
    const after = await request(`${gateway.url}/api/v1/api-keys`, { token: admin });
    expect(after.status).toBe(200);
    expect(after.body).toEqual(before);
  });
});
