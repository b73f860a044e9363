import Fastify, { type FastifyInstance } from 'fastify';
import type { Store } from '../store/store.ts';
import type { Metrics } from './metrics.ts';
import type { RedisTierStatus } from '../redis/redis-tier.ts';
import { VERSION } from '../version.ts';
import { readinessOf, StorePing, type FromMemory } from './readiness.ts';

/** What the ops server reads once the gateway is built and listening. */
export interface ServingParts {
  store: Store;
  metrics: Metrics;
  /** REDIS_URL's tier, when configured. */
  redis?: { status(): RedisTierStatus } | undefined;
  fromMemory(): FromMemory;
}

export interface OpsState {
  /** Set when shutdown begins, so /readyz turns 503 before the listener stops accepting. */
  draining: boolean;
}

export interface OpsServer {
  server: FastifyInstance;
  /** Until this is called, /readyz answers 503 `starting` and /metrics 503. */
  serving(parts: ServingParts): void;
}

/**
 * `/healthz`, `/readyz` and `/metrics` on OPS_PORT, never on the public port. Listening from
 * the start of the process, so a probe tells a starting replica (503) from a dead one (no
 * answer). `/healthz` is the process alone: no store, no Redis, ever.
 */
export function buildOpsServer(deps: { state: OpsState }): OpsServer {
  const ops = Fastify({ logger: false });
  let parts: (ServingParts & { ping: StorePing }) | undefined;
  ops.get('/healthz', async () => ({ status: 'ok', version: VERSION }));
  ops.get('/metrics', async (_request, reply) => {
    if (parts === undefined) return reply.code(503).send({ status: 'starting' });
    // The store's gauge is read now, not only when a probe last asked.
    await parts.ping.check();
    const { contentType, body } = await parts.metrics.scrape();
    return reply.type(contentType).send(body);
  });
  ops.get('/readyz', async (_request, reply) => {
    if (parts === undefined) return reply.code(503).send({ status: 'starting', down: [] });
    const store = await parts.ping.check();
    const redis = parts.redis?.status();
    const memory = parts.fromMemory();
    const { status, ready, down } = readinessOf({ draining: deps.state.draining, store, redis, memory });
    return reply.code(ready ? 200 : 503).send({
      status,
      down,
      checks: {
        config: { status: 'ok' },
        migrations: { status: 'ok' },
        store: { status: store, kind: parts.store.kind },
        redis: redis ?? { status: 'not_configured' },
        // What can still be accepted while the store is down.
        memory: { keys: memory.keys, admin_sessions: memory.adminSessions },
      },
    });
  });
  return {
    server: ops,
    serving(serving) {
      const ping = new StorePing({ store: serving.store, observe: (up) => serving.metrics.setDependencyUp('store', up) });
      parts = { ...serving, ping };
    },
  };
}
