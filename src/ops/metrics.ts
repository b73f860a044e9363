import { Registry, collectDefaultMetrics, type Counter, type Gauge, type Histogram } from 'prom-client';
import { ERROR_CODES } from '../errors/gateway-error.ts';
import type { ErrorCode } from '../errors/gateway-error.ts';
import { LabelIndex, type HotCounter, type HotHistogram } from './hot-metrics.ts';
import { createFamilies } from './metric-families.ts';

/*
 * Gatehouse metrics, served on OPS_PORT `/metrics` (docs/monitoring.md). Base units, `gatehouse_`
 * prefix, and a fixed, small label set (docs/monitoring.md: no key id, email or raw path is ever a label value): every label value comes from a closed
 * set (outcomes, error codes, route-table names, tiers), and anything else is folded into
 * `other` here, so no key id, email or raw path can ever become a series.
 *
 * | name                                              | type      | labels                                  |
 * | ------------------------------------------------- | --------- | --------------------------------------- |
 * | gatehouse_decisions_total                         | counter   | outcome, reason, credential, route      |
 * | gatehouse_decision_duration_seconds               | histogram | outcome, credential, route              |
 * | gatehouse_upstream_duration_seconds               | histogram | route, status_class                     |
 * | gatehouse_cache_lookups_total                     | counter   | tier, result                            |
 * | gatehouse_argon2_verifications_total              | counter   | result                                  |
 * | gatehouse_argon2_login_verifications_total        | counter   | (none); admin passwords and the decoy   |
 * | gatehouse_throttled_total                         | counter   | kind                                    |
 * | gatehouse_rate_limited_total                      | counter   | limit (key, tool)                       |
 * | gatehouse_rate_limit_fallback_total               | counter   | (none)                                  |
 * | gatehouse_revocation_barrier_duration_seconds     | histogram | (none)                                  |
 * | gatehouse_revocation_barrier_missed_replicas_total| counter   | (none)                                  |
 * | gatehouse_api_keys                                | gauge     | status                                  |
 * | gatehouse_logins_total                            | counter   | result                                  |
 * | gatehouse_fail_open_decisions_total               | counter   | (none); always 0, an alert fires if not |
 * | gatehouse_dependency_up                           | gauge     | dependency (store, redis)               |
 * | gatehouse_build_info                              | gauge     | version                                 |
 * | gatehouse_process_*, gatehouse_nodejs_*           | various   | prom-client defaults, incl. event-loop lag |
 * |   (gatehouse_nodejs_eventloop_lag_seconds, …_p99_seconds; minus the three `_total` gauges) |
 *
 * Label values: outcome allow|deny; reason = an ERROR_CODES key or `allowed`; credential
 * api_key|admin|none; route = a route-table name, one of GATEWAY_ROUTES, or `other`;
 * status_class 1xx..5xx|error|timeout; tier identity|state|redis; result per metric.
 */

export const METRIC_PREFIX = 'gatehouse_';
/** The label value that stands for anything outside a label's fixed set. */
export const OTHER = 'other';
/** Routes served by the gateway itself (not in the route table), always accepted as `route` values. */
export const GATEWAY_ROUTES = ['login', 'api_keys'] as const;

export type DecisionOutcome = 'allow' | 'deny';
export type DecisionReason = ErrorCode | 'allowed';
export type CredentialKind = 'api_key' | 'admin' | 'none';
export type CacheTier = 'identity' | 'state' | 'redis';
export type CacheResult = 'hit' | 'miss';
export type Argon2Result = 'match' | 'mismatch';
/** `login_queue`: a login refused because the argon2 login queue was full (DEFAULT_LOGIN_QUEUE_LIMIT). */
export type ThrottleKind = 'login' | 'key_prefix' | 'login_queue';
export type LoginResult = 'success' | 'failure' | 'throttled';
export type Dependency = 'store' | 'redis';
export type RateLimitKind = 'key' | 'tool';
/** An HTTP status from the upstream, or how the exchange failed without one. */
export type UpstreamStatus = number | 'error' | 'timeout';

export interface KeyCounts {
  active: number;
  disabled: number;
  expired: number;
  revoked: number;
}

export interface MetricsOptions {
  /** Route-table names (the `route` label); any other name is recorded as `other`. */
  routes?: readonly string[];
  /** Process and Node.js runtime metrics (default true); tests building many instances may turn them off. */
  processMetrics?: boolean;
}

export { BARRIER_BUCKETS, DECISION_BUCKETS, UPSTREAM_BUCKETS } from './metric-families.ts';

const OUTCOMES = new LabelIndex(['allow', 'deny'] satisfies DecisionOutcome[], OTHER);
const REASONS = new LabelIndex([...(Object.keys(ERROR_CODES) as ErrorCode[]), 'allowed'] satisfies DecisionReason[], OTHER);
const CREDENTIALS = new LabelIndex(['api_key', 'admin', 'none'] satisfies CredentialKind[], OTHER);
const TIERS: ReadonlySet<string> = new Set<CacheTier>(['identity', 'state', 'redis']);
const CACHE_RESULTS: ReadonlySet<string> = new Set<CacheResult>(['hit', 'miss']);
const ARGON2_RESULTS: ReadonlySet<string> = new Set<Argon2Result>(['match', 'mismatch']);
const THROTTLE_KINDS: ReadonlySet<string> = new Set<ThrottleKind>(['login', 'key_prefix', 'login_queue']);
const LOGIN_RESULTS: ReadonlySet<string> = new Set<LoginResult>(['success', 'failure', 'throttled']);
const DEPENDENCIES: ReadonlySet<string> = new Set<Dependency>(['store', 'redis']);
const RATE_LIMITS: ReadonlySet<string> = new Set<RateLimitKind>(['key', 'tool']);
const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
const UPSTREAM_STATUSES = new LabelIndex([...STATUS_CLASSES, 'error', 'timeout'], OTHER);
const UNCONVENTIONAL_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];
const ROUTE_NAME = /^[a-z][a-z0-9_]*$/;

interface Inc {
  inc(value?: number): void;
}

/**
 * The gateway's metrics on a registry of its own (never prom-client's global one: several
 * gateways may live in one test process). The recording methods take values from fixed sets
 * and fold anything else into `other`. The request path's decision and upstream series are
 * plain numbers found by index (hot-metrics.ts); the others reuse one label child per tuple.
 */
export class Metrics {
  readonly registry: Registry;

  readonly #routes: LabelIndex;
  // The request path's three: recorded as plain numbers (hot-metrics.ts).
  readonly #decisions: HotCounter;
  readonly #decisionDuration: HotHistogram;
  readonly #upstreamDuration: HotHistogram;
  readonly #cacheLookups: Counter<'tier' | 'result'>;
  readonly #argon2: Counter<'result'>;
  readonly #argon2Logins: Counter;
  readonly #throttled: Counter<'kind'>;
  readonly #rateLimited: Counter<'limit'>;
  readonly #rateLimitFallback: Counter;
  readonly #barrierDuration: Histogram;
  readonly #barrierMissed: Counter;
  readonly #apiKeys: Gauge<'status'>;
  readonly #logins: Counter<'result'>;
  readonly #failOpen: Counter;
  readonly #connectionsDropped: Counter;
  #openConnections: (() => Promise<number>) | undefined;
  readonly #dependencyUp: Gauge<'dependency'>;
  #keyCounter: (() => KeyCounts | Promise<KeyCounts>) | undefined;
  readonly #scrapeHooks: Array<() => void> = [];

  readonly #cacheChildren = new Map<string, Inc>();
  readonly #argon2Children = new Map<string, Inc>();
  readonly #throttledChildren = new Map<string, Inc>();
  readonly #rateLimitedChildren = new Map<string, Inc>();
  readonly #loginChildren = new Map<string, Inc>();

  constructor(options: MetricsOptions = {}) {
    const register = new Registry();
    this.registry = register;
    this.#routes = new LabelIndex([...(options.routes ?? []), ...GATEWAY_ROUTES].filter((name) => ROUTE_NAME.test(name)), OTHER);
    if (options.processMetrics ?? true) {
      collectDefaultMetrics({ register, prefix: METRIC_PREFIX });
      // Gauges named `_total` break the exposition conventions (`promtool check metrics`);
      // the per-type gauges beside them carry the same numbers (sum them).
      for (const name of UNCONVENTIONAL_DEFAULTS) register.removeSingleMetric(METRIC_PREFIX + name);
    }

    const families = createFamilies(register, {
      keyCounts: () => this.#collectKeyCounts(),
      openConnections: () => this.#openConnections?.(),
    });
    this.#decisions = families.decisions;
    this.#decisionDuration = families.decisionDuration;
    this.#upstreamDuration = families.upstreamDuration;
    this.#cacheLookups = families.cacheLookups;
    this.#argon2 = families.argon2;
    this.#argon2Logins = families.argon2Logins;
    this.#throttled = families.throttled;
    this.#rateLimited = families.rateLimited;
    this.#rateLimitFallback = families.rateLimitFallback;
    this.#barrierDuration = families.barrierDuration;
    this.#barrierMissed = families.barrierMissed;
    this.#apiKeys = families.apiKeys;
    this.#logins = families.logins;
    this.#failOpen = families.failOpen;
    this.#connectionsDropped = families.connectionsDropped;
    this.#dependencyUp = families.dependencyUp;
  }

  /** One authorization decision and how long it took. */
  decision(outcome: DecisionOutcome, reason: DecisionReason, credential: CredentialKind, route: string, seconds: number): void {
    const o = OUTCOMES.indexOf(outcome);
    const r = REASONS.indexOf(reason);
    const c = CREDENTIALS.indexOf(credential);
    const n = this.#routes.indexOf(route);
    const routes = this.#routes.size;
    const countAt = ((o * REASONS.size + r) * CREDENTIALS.size + c) * routes + n;
    const count =
      this.#decisions.at(countAt) ??
      this.#decisions.create(countAt, [OUTCOMES.values[o]!, REASONS.values[r]!, CREDENTIALS.values[c]!, this.#routes.values[n]!]);
    count.count++;
    const durationAt = (o * CREDENTIALS.size + c) * routes + n;
    const duration =
      this.#decisionDuration.at(durationAt) ??
      this.#decisionDuration.create(durationAt, [OUTCOMES.values[o]!, CREDENTIALS.values[c]!, this.#routes.values[n]!]);
    this.#decisionDuration.observe(duration, seconds);
  }

  /** One upstream exchange: its HTTP status (or `error` / `timeout`) and duration. */
  upstream(route: string, status: UpstreamStatus, seconds: number): void {
    const n = this.#routes.indexOf(route);
    const s = UPSTREAM_STATUSES.indexOf(statusClassOf(status));
    const at = n * UPSTREAM_STATUSES.size + s;
    const series = this.#upstreamDuration.at(at) ?? this.#upstreamDuration.create(at, [this.#routes.values[n]!, UPSTREAM_STATUSES.values[s]!]);
    this.#upstreamDuration.observe(series, seconds);
  }

  cacheLookup(tier: CacheTier, result: CacheResult, count = 1): void {
    const t = TIERS.has(tier) ? tier : OTHER;
    const r = CACHE_RESULTS.has(result) ? result : OTHER;
    const key = `${t}|${r}`;
    let child = this.#cacheChildren.get(key);
    if (child === undefined) {
      child = this.#cacheLookups.labels(t, r);
      this.#cacheChildren.set(key, child);
    }
    child.inc(count);
  }

  argon2Verify(result: Argon2Result, count = 1): void {
    countOne(this.#argon2, this.#argon2Children, ARGON2_RESULTS.has(result) ? result : OTHER, count);
  }

  argon2LoginVerify(count = 1): void {
    if (count > 0) this.#argon2Logins.inc(count);
  }

  throttled(kind: ThrottleKind, count = 1): void {
    countOne(this.#throttled, this.#throttledChildren, THROTTLE_KINDS.has(kind) ? kind : OTHER, count);
  }

  /** A request refused 429 by a rate limit: the key's own, or a tool's. */
  rateLimited(limit: RateLimitKind): void {
    countOne(this.#rateLimited, this.#rateLimitedChildren, RATE_LIMITS.has(limit) ? limit : OTHER);
  }

  /** A request counted by this replica alone, Redis being out of reach. */
  rateLimitFallback(): void {
    this.#rateLimitFallback.inc();
  }

  /**
   * Runs `collect` before every scrape: counters kept by hot-path components as plain numbers
   * (the verifier's stats) are added here, so the request path touches no metric object.
   */
  onScrape(collect: () => void): void {
    this.#scrapeHooks.push(collect);
  }

  login(result: LoginResult): void {
    countOne(this.#logins, this.#loginChildren, LOGIN_RESULTS.has(result) ? result : OTHER);
  }

  /** One revocation barrier: how long it took and how many replicas missed it. */
  revocationBarrier(seconds: number, missedReplicas: number): void {
    this.#barrierDuration.observe(seconds);
    if (missedReplicas > 0) this.#barrierMissed.inc(missedReplicas);
  }

  /** Sets the key gauge; use `setKeyCounter` instead to read the counts at scrape time. */
  setKeysByStatus(counts: KeyCounts): void {
    this.#apiKeys.set({ status: 'active' }, counts.active);
    this.#apiKeys.set({ status: 'disabled' }, counts.disabled);
    this.#apiKeys.set({ status: 'expired' }, counts.expired);
    this.#apiKeys.set({ status: 'revoked' }, counts.revoked);
  }

  /** Reads key counts on every scrape; if it fails, the last values stay. */
  setKeyCounter(counter: (() => KeyCounts | Promise<KeyCounts>) | undefined): void {
    this.#keyCounter = counter;
  }

  /**
   * Counts a request let through without a decision. Nothing in Gatehouse calls this: the
   * counter exists, at 0, so that dashboards and the fail-open alert can prove it stays there.
   */
  failOpen(): void {
    this.#failOpen.inc();
  }

  /** A connection closed on arrival (MAX_CONNECTIONS). */
  connectionDropped(): void {
    this.#connectionsDropped.inc();
  }

  /** Reads the public listener's open connections at scrape time. */
  setOpenConnections(count: () => Promise<number>): void {
    this.#openConnections = count;
  }

  setDependencyUp(dependency: Dependency, up: boolean): void {
    if (!DEPENDENCIES.has(dependency)) return;
    this.#dependencyUp.set({ dependency }, up ? 1 : 0);
  }

  /** The exposition text for `GET /metrics`. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    for (const collect of this.#scrapeHooks) collect();
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  async #collectKeyCounts(): Promise<void> {
    if (this.#keyCounter === undefined) return;
    try {
      this.setKeysByStatus(await this.#keyCounter());
    } catch {
      // A store hiccup must not break the scrape; gatehouse_dependency_up reports the store.
    }
  }
}

/** Increments a one-label counter through its cached child. */
function countOne(counter: Counter<string>, children: Map<string, Inc>, value: string, count = 1): void {
  let child = children.get(value);
  if (child === undefined) {
    child = counter.labels(value);
    children.set(value, child);
  }
  child.inc(count);
}

function statusClassOf(status: UpstreamStatus): string {
  if (status === 'error' || status === 'timeout') return status;
  return STATUS_CLASSES[Math.floor(status / 100) - 1] ?? OTHER;
}
