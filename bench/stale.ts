import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Redis } from 'ioredis';
import { Client } from './client.ts';
import { loginAdmin, startGateway, type GatewayHandle } from './gateway.ts';
import type { Extras } from './report.ts';
import { EVENT_BODY, EVENTS_PATH } from './scenarios.ts';
import { onServer } from './seed-cache.ts';

export interface ReplicaServices {
  databaseUrl: string;
  redisUrl: string;
}

const LOCAL_POSTGRES = 'postgres://postgres@127.0.0.1:5432/postgres';
const LOCAL_REDIS = 'redis://127.0.0.1:6379';

/** PostgreSQL: BENCH_DATABASE_URL (or the tests' DATABASE_URL_TEST), else the local default port when it answers. */
export async function findPostgres(): Promise<string | undefined> {
  return process.env.BENCH_DATABASE_URL || process.env.DATABASE_URL_TEST || ((await postgresAnswers(LOCAL_POSTGRES)) ? LOCAL_POSTGRES : undefined);
}

/** Redis: BENCH_REDIS_URL (or REDIS_URL_TEST), else the local default port when it answers. */
export async function findRedis(): Promise<string | undefined> {
  return process.env.BENCH_REDIS_URL || process.env.REDIS_URL_TEST || ((await redisAnswers(LOCAL_REDIS)) ? LOCAL_REDIS : undefined);
}

/** Both, for the 3-replica check. */
export async function replicaServices(): Promise<ReplicaServices | undefined> {
  const [databaseUrl, redisUrl] = await Promise.all([findPostgres(), findRedis()]);
  return databaseUrl === undefined || redisUrl === undefined ? undefined : { databaseUrl, redisUrl };
}

async function postgresAnswers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

async function redisAnswers(url: string): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 1_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/**
 * Three gateways on one fresh PostgreSQL database and one Redis. For each of `rounds` keys:
 * the key is used on every replica (cached everywhere), traffic with it runs on all three, a
 * DELETE goes to one of them; every 2xx for a request *sent after* the 204 arrived is a stale
 * acceptance.
 */
export async function staleAcceptances(services: ReplicaServices, upstreamUrl: string, rounds: number, log: (line: string) => void): Promise<NonNullable<Extras['stale']>> {
  const name = `gatehouse_bench_${randomBytes(5).toString('hex')}`;
  await onServer(services.databaseUrl, `CREATE DATABASE ${name}`);
  const url = new URL(services.databaseUrl);
  url.pathname = `/${name}`;
  const replicas: GatewayHandle[] = [];
  const env = { LOG_LEVEL: 'warn', JWT_SECRET: randomBytes(32).toString('base64url'), ARGON2_MEMORY_KIB: '1024', ARGON2_TIME_COST: '1' };
  try {
    // The first alone: it migrates and creates the admin.
    replicas.push(await startGateway({ upstreamUrl, databaseUrl: url.toString(), redisUrl: services.redisUrl, env }));
    replicas.push(...(await Promise.all([1, 2].map(() => startGateway({ upstreamUrl, databaseUrl: url.toString(), redisUrl: services.redisUrl, env })))));
    log(`3 replicas on PostgreSQL + Redis (${name})`);
    const admin = await loginAdmin(replicas[0]!.url);
    const clients = replicas.map((replica) => new Client(replica.url, 8));
    let accepted = 0;
    let attempts = 0;
    try {
      for (let round = 0; round < rounds; round++) {
        const created = await fetch(`${replicas[round % 3]!.url}/api/v1/api-keys`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${admin}` },
          body: JSON.stringify({ name: `stale ${round}`, agent_id: 1, scopes: ['events:write'] }),
        });
        const { key, id } = (await created.json()) as { key: string; id: number };
        const use = { path: EVENTS_PATH, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: EVENT_BODY };
        for (const client of clients) {
          const warm = await client.send(use);
          if (warm.status !== 200) throw new Error(`a fresh key was refused: ${warm.status} ${warm.code}`);
        }
        let answeredAt = Number.POSITIVE_INFINITY;
        let stop = false;
        const traffic = clients.flatMap((client) =>
          Array.from({ length: 4 }, async () => {
            while (!stop) {
              const sentAt = performance.now();
              const answer = await client.send(use);
              if (sentAt > answeredAt) {
                attempts++;
                if (answer.status < 300) accepted++;
              }
            }
          }),
        );
        await new Promise((resolve) => setTimeout(resolve, 200));
        const deleted = await fetch(`${replicas[(round + 1) % 3]!.url}/api/v1/api-keys/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${admin}` } });
        await deleted.arrayBuffer();
        answeredAt = performance.now();
        if (deleted.status !== 204) throw new Error(`DELETE answered ${deleted.status}`);
        await new Promise((resolve) => setTimeout(resolve, 300));
        stop = true;
        await Promise.all(traffic);
      }
    } finally {
      await Promise.all(clients.map((client) => client.close()));
    }
    return { replicas: 3, accepted, attempts };
  } finally {
    await Promise.all(replicas.map((replica) => replica.process.stop()));
    await onServer(services.databaseUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
  }
}
