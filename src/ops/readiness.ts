import type { RedisTierStatus } from '../redis/redis-tier.ts';
import type { Store } from '../store/store.ts';

/** A store slower than this to answer `SELECT 1` counts as down, so `/readyz` answers within the probe's own timeout (2 s in deploy/). */
export const STORE_PING_TIMEOUT_MS = 1_000;

/**
 * `/readyz`'s answer (docs/monitoring.md, "Health and readiness"; docs/adr/0032-readiness-while-the-caches-decide.md).
 * `ready` and `degraded` are 200; the rest are 503.
 */
export type ReadinessStatus = 'ready' | 'degraded' | 'starting' | 'draining' | 'unavailable';

export type DependencyName = 'store' | 'redis';

/** What the replica can accept without the store at this moment. */
export interface FromMemory {
  /** Some key's state is cached, fresh, and may be used (not while the revocation channel is unproven). */
  keys: boolean;
  /** Admin tokens are checked in memory (the ended sessions are in sync). */
  adminSessions: boolean;
}

export interface ReadinessFacts {
  draining: boolean;
  store: 'ok' | 'down';
  /** REDIS_URL's tier, when one is configured. */
  redis: RedisTierStatus | undefined;
  memory: FromMemory;
}

export interface Readiness {
  status: ReadinessStatus;
  ready: boolean;
  /** The dependencies not fully up, for the operator reading the body: a name here is never by itself a reason to be unready. */
  down: DependencyName[];
}

/**
 * Ready while the replica can decide requests. Without the store it still decides every
 * credential it can accept from memory (keys whose state is cached and fresh, admin tokens),
 * so it stays ready, `degraded`. It is unable to decide anything when the store is down and it
 * can accept no credential from memory either: no key state cached and fresh (none used within
 * `KEY_CACHE_TTL`, or caching suspended while the revocation channel is unproven) and admin
 * sessions not checkable in memory (the ended sessions may be stale: Redis lost, and not read
 * from the store since). Then every credential would be answered 503, and only refusals are
 * left, so it leaves the load balancer to replicas that can still accept.
 */
export function readinessOf(facts: ReadinessFacts): Readiness {
  const down: DependencyName[] = [];
  if (facts.store === 'down') down.push('store');
  if (facts.redis !== undefined && facts.redis.status !== 'ok') down.push('redis');
  if (facts.draining) return { status: 'draining', ready: false, down };
  const fromMemory = facts.memory.keys || facts.memory.adminSessions;
  if (facts.store === 'down' && !fromMemory) return { status: 'unavailable', ready: false, down };
  return { status: down.length === 0 ? 'ready' : 'degraded', ready: true, down };
}

/**
 * Pings the store with a bound: one ping in flight at a time (probes and scrapes that come
 * meanwhile share it), and an answer after `timeoutMs` whatever the store does, so a hung
 * database reads as down instead of hanging the probe (which would fail it all the same).
 */
export class StorePing {
  readonly #store: Pick<Store, 'ping'>;
  readonly #timeoutMs: number;
  readonly #observe: (up: boolean) => void;
  #inFlight: Promise<boolean> | undefined;

  constructor(options: { store: Pick<Store, 'ping'>; observe: (up: boolean) => void; timeoutMs?: number }) {
    this.#store = options.store;
    this.#observe = options.observe;
    this.#timeoutMs = options.timeoutMs ?? STORE_PING_TIMEOUT_MS;
  }

  async check(): Promise<'ok' | 'down'> {
    this.#inFlight ??= this.#store.ping().then(
      () => true,
      () => false,
    );
    const ping = this.#inFlight;
    void ping.finally(() => {
      if (this.#inFlight === ping) this.#inFlight = undefined;
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), this.#timeoutMs);
    });
    const up = await Promise.race([ping, late]);
    clearTimeout(timer);
    this.#observe(up);
    return up ? 'ok' : 'down';
  }
}
