/* eslint-disable @typescript-eslint/no-explicit-any -- /readyz and metrics are read as loosely typed JSON and text */
import { expect, vi } from 'vitest';
import { startGateway, type GatewayProcess } from './gateway-process.ts';
import { request } from './http.ts';
import { startOrigin, type Origin } from './origin.ts';
import { createTestDatabase, redisUrl, type TestDatabase } from './services.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

/** Starts `count` gateways with the same environment (one database, one Redis), in parallel. */
export async function startReplicas(count: number, env: Record<string, string>): Promise<GatewayProcess[]> {
  // The first one alone: it runs the migrations and bootstraps the admin, the others find both done.
  const first = await startGateway(env);
  const rest = await Promise.all(Array.from({ length: count - 1 }, () => startGateway(env)));
  return [first, ...rest];
}

/** Three replicas on a fresh PostgreSQL database and the tests' Redis, in front of a recording origin. */
export interface RelayedReplicas {
  database: TestDatabase;
  origin: Origin;
  /** Replica 0 reaches Redis through it: `cut()` takes Redis out of that replica's reach alone. */
  relay: TcpProxy;
  replicas: GatewayProcess[];
  /** Stops everything it started, whatever did start. */
  close(): Promise<void>;
}

/** Starts three replicas, replica 0 through a relay to Redis, and waits until every one is subscribed. */
export async function startRelayedReplicas(): Promise<RelayedReplicas> {
  const database = await createTestDatabase();
  const origin = await startOrigin();
  const redis = new URL(redisUrl()!);
  const relay = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
  const env = { DATABASE_URL: database.url, REDIS_URL: redisUrl()!, UPSTREAM_URL: origin.url, LOG_LEVEL: 'warn' };
  const throughRelay = new URL(redisUrl()!);
  throughRelay.host = `127.0.0.1:${relay.port}`;
  const replicas: GatewayProcess[] = [];
  const close = async () => {
    await Promise.all(replicas.map((replica) => replica.stop()));
    await relay.close();
    await origin.close();
    await database.drop();
  };
  try {
    // The first alone: it migrates and bootstraps the admin.
    replicas.push(await startGateway({ ...env, REDIS_URL: throughRelay.toString() }));
    replicas.push(...(await Promise.all([startGateway(env), startGateway(env)])));
    await waitForRedis(replicas, 'ok');
  } catch (error) {
    await close();
    throw error;
  }
  return { database, origin, relay, replicas, close };
}

/** The event route of the default table: any key with `events:write` may post to it. */
export const EVENTS_PATH = '/api/v1/agents/1/events';

/** Uses an API key on a replica; resolves with the status and the problem code, if any. */
export async function useKey(gateway: GatewayProcess, key: string): Promise<{ status: number; code: string | undefined; startedAt: number }> {
  const startedAt = performance.now();
  const response = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: key, json: { type: 'test' } });
  return { status: response.status, code: response.body?.code, startedAt };
}

export async function readyz(gateway: GatewayProcess): Promise<{ status: number; body: any }> {
  const response = await request(`${gateway.opsUrl}/readyz`);
  return { status: response.status, body: response.body };
}

/** Waits until every replica reports its Redis tier `ok` (connected and subscribed) or `degraded`. */
export async function waitForRedis(gateways: GatewayProcess[], status: 'ok' | 'degraded', timeout = 15_000): Promise<void> {
  await vi.waitFor(
    async () => {
      const states = await Promise.all(gateways.map(async (gateway) => (await readyz(gateway)).body.checks.redis.status));
      expect(states).toEqual(gateways.map(() => status));
    },
    { timeout, interval: 50 },
  );
}

/** The sum of a metric's samples whose labels include all of `labels` (0 when absent). */
export async function metric(gateway: GatewayProcess, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = (await request(`${gateway.opsUrl}/metrics`)).text;
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const present = match[2] ?? '';
    if (Object.entries(labels).every(([label, value]) => present.includes(`${label}="${value}"`))) total += Number(match[3]);
  }
  return total;
}
