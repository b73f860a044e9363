import Fastify, { type FastifyInstance } from 'fastify';
import type { Store } from '../store/store.ts';
import type { Metrics } from './metrics.ts';
import type { RedisTierStatus } from '../redis/redis-tier.ts';
import { VERSION } from '../version.ts';

export interface OpsState {
  /** Set when shutdown begins, so /readyz turns 503 before the listener stops accepting. */
  draining: boolean;
}

/** `/healthz` and `/readyz` on OPS_PORT, never on the public port. */
export function buildOpsServer(deps: {
  store: Store;
  state: OpsState;
  metrics: Metrics;
  /** REDIS_URL's tier; `degraded` is reported, never a reason to be unready (every guarantee holds through the store). */
  redis?: { status(): RedisTierStatus };
}): FastifyInstance {
  const ops = Fastify({ logger: false });
  ops.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await deps.metrics.scrape();
    return reply.type(contentType).send(body);
  });
  ops.get('/healthz', async () => ({ status: 'ok', version: VERSION }));
  ops.get('/readyz', async (_request, reply) => {
    const store = await deps.store.ping().then(
      () => ({ status: 'ok' as const }),
      () => ({ status: 'down' as const }),
    );
    deps.metrics.setDependencyUp('store', store.status === 'ok');
    const ready = !deps.state.draining && store.status === 'ok';
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : deps.state.draining ? 'draining' : 'not_ready',
      checks: {
        config: { status: 'ok' },
        migrations: { status: 'ok' },
        store: { ...store, kind: deps.store.kind },
        redis: deps.redis?.status() ?? { status: 'not_configured' },
      },
    });
  });
  return ops;
}
