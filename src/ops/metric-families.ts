import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { VERSION } from '../version.ts';
import { HotCounter, HotHistogram } from './hot-metrics.ts';

/**
 * The gateway's metric families as exposed (names, help, labels, buckets; the table at the top
 * of metrics.ts), registered in the order the exposition lists them. Metrics records into them.
 */

/** Decision latency: a cached decision is tens of µs; an argon2id verify on a cold key is tens of ms. */
export const DECISION_BUCKETS = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
];
/** Upstream latency, up to the 30 s default UPSTREAM_TIMEOUT. */
export const UPSTREAM_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Revocation barrier: one Redis round trip to every replica, bounded by a few seconds. */
export const BARRIER_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** What the scrape-time gauges read when scraped. */
export interface ScrapeReaders {
  /** Sets the API key gauge (Metrics.setKeysByStatus); never rejects. */
  keyCounts(): Promise<void>;
  /** The public listener's open connections, or undefined when nothing reports them. */
  openConnections(): Promise<number> | undefined;
}

export interface Families {
  decisions: HotCounter;
  decisionDuration: HotHistogram;
  upstreamDuration: HotHistogram;
  cacheLookups: Counter<'tier' | 'result'>;
  argon2: Counter<'result'>;
  argon2Logins: Counter;
  throttled: Counter<'kind'>;
  rateLimited: Counter<'limit'>;
  rateLimitFallback: Counter;
  barrierDuration: Histogram;
  barrierMissed: Counter;
  apiKeys: Gauge<'status'>;
  logins: Counter<'result'>;
  failOpen: Counter;
  connectionsDropped: Counter;
  dependencyUp: Gauge<'dependency'>;
}

/** Creates every family on `registry`, in exposition order. */
export function createFamilies(registry: Registry, readers: ScrapeReaders): Families {
  const registers = [registry];
  return {
    ...requestPathFamilies(registers),
    ...keyCheckFamilies(registers),
    ...rateLimitFamilies(registers),
    ...barrierFamilies(registers),
    ...adminFamilies(registers, readers),
    ...healthFamilies(registers, readers),
  };
}

function requestPathFamilies(registers: Registry[]): Pick<Families, 'decisions' | 'decisionDuration' | 'upstreamDuration'> {
  return {
    decisions: new HotCounter({
      name: 'gatehouse_decisions_total',
      help: 'Authorization decisions by outcome, reason (the stable error code, or allowed), credential and route.',
      labelNames: ['outcome', 'reason', 'credential', 'route'],
      registers,
    }),
    decisionDuration: new HotHistogram({
      name: 'gatehouse_decision_duration_seconds',
      help: 'Time to reach an authorization decision, from request to allow or deny.',
      labelNames: ['outcome', 'credential', 'route'],
      buckets: DECISION_BUCKETS,
      registers,
    }),
    upstreamDuration: new HotHistogram({
      name: 'gatehouse_upstream_duration_seconds',
      help: 'Upstream response time by route and status class (error: no response, timeout: UPSTREAM_TIMEOUT).',
      labelNames: ['route', 'status_class'],
      buckets: UPSTREAM_BUCKETS,
      registers,
    }),
  };
}

function keyCheckFamilies(registers: Registry[]): Pick<Families, 'cacheLookups' | 'argon2' | 'argon2Logins' | 'throttled'> {
  return {
    cacheLookups: new Counter({
      name: 'gatehouse_cache_lookups_total',
      help: 'Key cache lookups by tier and result.',
      labelNames: ['tier', 'result'],
      registers,
    }),
    argon2: new Counter({
      name: 'gatehouse_argon2_verifications_total',
      help: 'argon2id hash verifications by result.',
      labelNames: ['result'],
      registers,
    }),
    argon2Logins: new Counter({
      name: 'gatehouse_argon2_login_verifications_total',
      help: 'argon2id verifications of admin login passwords (an unknown email is verified against a decoy).',
      registers,
    }),
    throttled: new Counter({
      name: 'gatehouse_throttled_total',
      help: 'Attempts refused by a failure limiter, by kind.',
      labelNames: ['kind'],
      registers,
    }),
  };
}

/** The rate limits (docs/api-keys.md, "Rate limits"): both limits shown from the start, at 0. */
function rateLimitFamilies(registers: Registry[]): Pick<Families, 'rateLimited' | 'rateLimitFallback'> {
  const rateLimited = new Counter({
    name: 'gatehouse_rate_limited_total',
    help: 'Requests refused 429 rate_limited, by the limit that refused them (key: the key\'s own; tool: a tool\'s, per key).',
    labelNames: ['limit'],
    registers,
  });
  rateLimited.inc({ limit: 'key' }, 0);
  rateLimited.inc({ limit: 'tool' }, 0);
  const rateLimitFallback = new Counter({
    name: 'gatehouse_rate_limit_fallback_total',
    help: 'Requests counted against a rate limit by this replica alone because Redis could not be reached.',
    registers,
  });
  return { rateLimited, rateLimitFallback };
}

function barrierFamilies(registers: Registry[]): Pick<Families, 'barrierDuration' | 'barrierMissed'> {
  return {
    barrierDuration: new Histogram({
      name: 'gatehouse_revocation_barrier_duration_seconds',
      help: 'Time for a revocation to be acknowledged by every replica.',
      buckets: BARRIER_BUCKETS,
      registers,
    }),
    barrierMissed: new Counter({
      name: 'gatehouse_revocation_barrier_missed_replicas_total',
      help: 'Replicas that did not acknowledge a revocation barrier in time.',
      registers,
    }),
  };
}

function adminFamilies(registers: Registry[], readers: ScrapeReaders): Pick<Families, 'apiKeys' | 'logins'> {
  return {
    apiKeys: new Gauge({
      name: 'gatehouse_api_keys',
      help: 'Stored API keys by status.',
      labelNames: ['status'],
      registers,
      collect: () => readers.keyCounts(),
    }),
    logins: new Counter({
      name: 'gatehouse_logins_total',
      help: 'Admin logins by result.',
      labelNames: ['result'],
      registers,
    }),
  };
}

/** Fail-open, connections, dependencies and the build: the families alerts and dashboards watch. */
function healthFamilies(registers: Registry[], readers: ScrapeReaders): Pick<Families, 'failOpen' | 'connectionsDropped' | 'dependencyUp'> {
  const failOpen = new Counter({
    name: 'gatehouse_fail_open_decisions_total',
    help: 'Requests let through without a decision. Gatehouse fails closed: this stays 0.',
    registers,
  });
  const connectionsDropped = new Counter({
    name: 'gatehouse_connections_dropped_total',
    help: 'Client connections closed on arrival because MAX_CONNECTIONS were open.',
    registers,
  });
  const openConnections: Gauge = new Gauge({
    name: 'gatehouse_open_connections',
    help: 'Client connections open on the public listener.',
    registers,
    collect: async () => {
      const count = readers.openConnections();
      if (count !== undefined) openConnections.set(await count.catch(() => 0));
    },
  });
  const dependencyUp = new Gauge({
    name: 'gatehouse_dependency_up',
    help: 'Whether a dependency (store, redis) answers: 1 up, 0 down.',
    labelNames: ['dependency'],
    registers,
  });
  new Gauge({
    name: 'gatehouse_build_info',
    help: 'Gatehouse version; always 1.',
    labelNames: ['version'],
    registers,
  }).set({ version: VERSION }, 1);
  return { failOpen, connectionsDropped, dependencyUp };
}
