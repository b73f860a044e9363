/* eslint-disable @typescript-eslint/no-explicit-any -- /readyz and metrics are read as loosely typed JSON and text */
import { expect, vi } from 'vitest';
import { startGateway, type GatewayProcess } from './gateway-process.ts';
import { request } from './http.ts';

/** Starts `count` gateways with the same environment (one database, one Redis), in parallel. */
export async function startReplicas(count: number, env: Record<string, string>): Promise<GatewayProcess[]> {
  // The first one alone: it runs the migrations and bootstraps the admin, the others find both done.
  const first = await startGateway(env);
  const rest = await Promise.all(Array.from({ length: count - 1 }, () => startGateway(env)));
  return [first, ...rest];
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
