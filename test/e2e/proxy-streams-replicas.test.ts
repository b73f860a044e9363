import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin } from '../support/http.ts';
import { startReplicas, waitForRedis, EVENTS_PATH } from '../support/replicas.ts';
import { createTestDatabase, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';
import { expectCutByDelete, openEventStream, openTunnel, startStreamOrigin, type StreamOrigin } from '../support/stream-origin.ts';

/**
 * "A credential that ends while its connection is open", across replicas: the streams are on
 * one replica, the key is revoked on the other, and they are closed before that DELETE's 204.
 */
describe.skipIf(postgresUrl() === null || redisUrl() === null)('revoking a key closes its streams on every replica before the 204', () => {
  let database: TestDatabase;
  let origin: StreamOrigin;
  let replicas: GatewayProcess[];
  let admin: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    origin = await startStreamOrigin();
    replicas = await startReplicas(2, { DATABASE_URL: database.url, REDIS_URL: redisUrl()!, UPSTREAM_URL: origin.url, LOG_LEVEL: 'warn' });
    await waitForRedis(replicas, 'ok');
    admin = await loginAdmin(replicas[0]!.url);
  }, 120_000);
  afterAll(async () => {
    await Promise.all((replicas ?? []).map((replica) => replica.stop()));
    await origin?.close();
    await database?.drop();
  });

  it('an MCP stream and a WebSocket tunnel on replica 2 end before replica 1 answers the DELETE', async () => {
    const [revoker, holder] = replicas as [GatewayProcess, GatewayProcess];
    const created = await createKey(revoker.url, admin, { name: 'held elsewhere', scopes: ['mcp:agents', 'events:write'] });
    expect(created.status).toBe(201);
    const token = created.body.key as string;

    const outcome = await openEventStream(`${holder.url}/mcp`, token);
    expect(outcome.status).toBe(200);
    const stream = outcome.stream!;
    const tunnel = await openTunnel(`${holder.url.replace('http:', 'ws:')}${EVENTS_PATH}`, token);
    expect(origin.open()).toBe(2);

    await expectCutByDelete(`${revoker.url}/api/v1/api-keys/${created.body.id}`, admin, [stream, tunnel], origin);
    expect((await openEventStream(`${holder.url}/mcp`, token)).status).toBe(401);
  });
});
