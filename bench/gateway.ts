import { npmStart } from './npm-start.ts';
import { freePort, REPO_ROOT, spawnServer, type Spawned } from './processes.ts';

export const ADMIN_EMAIL = 'bench@example.test';
export const ADMIN_PASSWORD = 'benchmark admin password';

export interface GatewayHandle {
  url: string;
  opsUrl: string;
  process: Spawned;
}

export interface GatewayOptions {
  upstreamUrl: string;
  dataDir?: string;
  databaseUrl?: string;
  redisUrl?: string;
  /** Extra node flags, e.g. `--cpu-prof`. */
  nodeFlags?: string[];
  /** Passed through (ARGON2_*, KEY_CACHE_*, LOG_LEVEL …); the gateway's own defaults otherwise. */
  env?: Record<string, string>;
}


/**
 * The gateway as `npm start` runs it (its node flags and entry point), a process of its own.
 * `BENCH_GATEWAY_NODE_FLAGS` adds node flags, to try a tuning before it becomes the default.
 */
export async function startGateway(options: GatewayOptions): Promise<GatewayHandle> {
  const start = npmStart(REPO_ROOT);
  const port = await freePort();
  const opsPort = await freePort();
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: String(port),
    OPS_PORT: String(opsPort),
    UPSTREAM_URL: options.upstreamUrl,
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    ...(options.dataDir === undefined ? {} : { DATA_DIR: options.dataDir }),
    ...(options.databaseUrl === undefined ? {} : { DATABASE_URL: options.databaseUrl }),
    ...(options.redisUrl === undefined ? {} : { REDIS_URL: options.redisUrl }),
    ...start.env,
    ...options.env,
  };
  const spawned = await spawnServer({
    name: 'gateway',
    command: process.execPath,
    args: [...start.flags, ...(process.env.BENCH_GATEWAY_NODE_FLAGS?.split(' ').filter(Boolean) ?? []), ...(options.nodeFlags ?? []), start.script],
    env,
    readyUrl: `http://127.0.0.1:${opsPort}/readyz`,
  });
  return { url: `http://127.0.0.1:${port}`, opsUrl: `http://127.0.0.1:${opsPort}`, process: spawned };
}

export async function loginAdmin(url: string): Promise<string> {
  const response = await fetch(`${url}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD }),
  });
  const body = (await response.json()) as { token?: string };
  if (!response.ok || typeof body.token !== 'string') throw new Error(`admin login failed: ${response.status} ${JSON.stringify(body)}`);
  return body.token;
}

/** The sum of a Prometheus metric's samples whose labels include all of `labels` (0 when absent). */
export async function readMetric(opsUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${opsUrl}/metrics`)).text();
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

/** argon2id verifications the gateway performed since it started (match and mismatch). */
export function argon2Verifies(opsUrl: string): Promise<number> {
  return readMetric(opsUrl, 'gatehouse_argon2_verifications_total');
}
