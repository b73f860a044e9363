import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { LoginService, LOGIN_FAILURE_LIMIT, LOGIN_FAILURE_WINDOW_MS } from './admin/login.ts';
import { SessionTokens } from './admin/sessions.ts';
import type { Config } from './config/load.ts';
import { Argon2Hasher } from './crypto/argon2.ts';
import { OwnEndpoints } from './door/own-endpoints.ts';
import { RequestDoor } from './door/request-door.ts';
import { GatewayError } from './errors/gateway-error.ts';
import { clientErrorHandler } from './http/client-error.ts';
import { errorHandler, sendProblem } from './http/error-handler.ts';
import { registerEndpoints } from './http/endpoints.ts';
import { PublicServers, type Resolve } from './http/public-server.ts';
import { requestIdOf } from './http/request-id.ts';
import { KeyService } from './keys/key-service.ts';
import { DEFAULT_USAGE_FLUSH_INTERVAL_MS, EMBEDDED_USAGE_FLUSH_INTERVAL_MS, UsageRecorder } from './keys/usage-recorder.ts';
import { MemoryFailureLimiter } from './limits/failure-limiter.ts';
import { LocalRateLimiter, type RateLimiter } from './limits/rate-limiter.ts';
import { createMcpHandler } from './mcp/mcp-handler.ts';
import { RedisToolSchemas } from './mcp/redis-tool-schemas.ts';
import { ToolParamHeaders } from './mcp/tool-param-headers.ts';
import { MemorySessionBindings, type SessionBindings } from './mcp/session-bindings.ts';
import { RedisSessionBindings } from './mcp/redis-session-bindings.ts';
import { exportArgon2Stats } from './ops/argon2-metrics.ts';
import { Metrics } from './ops/metrics.ts';
import type { FromMemory } from './ops/readiness.ts';
import { exportVerifierStats } from './ops/verifier-metrics.ts';
import { Authenticator } from './pipeline/authenticate.ts';
import { RequestPipeline } from './pipeline/request-pipeline.ts';
import { compileRoutes } from './policy/routes.ts';
import { ToolGrants } from './policy/scopes.ts';
import { Forwarder } from './proxy/forward.ts';
import { OpenStreams } from './proxy/open-streams.ts';
import { assertSingleHeaders } from './proxy/raw-headers.ts';
import { Upstream } from './proxy/upstream.ts';
import { IdentityHeaderValues } from './proxy/upstream-headers.ts';
import { createKeyStateListener } from './redis/key-state-listener.ts';
import { createSessionEndListener } from './redis/session-end-listener.ts';
import type { BarrierResult } from './redis/revocation-bus.ts';
import { EndedSessions } from './admin/ended-sessions.ts';
import { PasswordChange } from './admin/password-change.ts';
import { InitialPasswordFile } from './admin/initial-password-file.ts';
import { SessionService } from './admin/session-service.ts';
import { refreshEndedSessions, resyncEndedSessions } from './admin/ended-sessions-refresh.ts';
import { RedisProbeGate } from './redis/probe-gate.ts';
import { RedisTier } from './redis/redis-tier.ts';
import type { Store } from './store/store.ts';
import { KeyVerifier, KEY_PREFIX_FAILURE_LIMIT, KEY_PREFIX_FAILURE_WINDOW_MS, KEY_PREFIX_PROBE_INTERVAL_MS } from './verify/key-verifier.ts';
import { isLingering } from './http/lingering-close.ts';

export interface Deps {
  store: Store;
  /** The clock; tests freeze it. */
  now?: () => Date;
  /** Fastify logger options or instance; defaults to pino JSON at `LOG_LEVEL`. */
  logger?: FastifyServerOptions['logger'];
}

export interface Gateway {
  app: FastifyInstance;
  hasher: Argon2Hasher;
  sessions: SessionTokens;
  keys: KeyService;
  verifier: KeyVerifier;
  usage: UsageRecorder;
  metrics: Metrics;
  /** Shared with other replicas (REDIS_URL); undefined for a single replica. */
  redis: RedisTier | undefined;
  /** `DATA_DIR/initial-admin-password`: written at the first admin's creation, removed at its first password change. */
  initialPassword: InitialPasswordFile;
  /** Listens on `host` (every address `localhost` names: `resolve`, DNS by default) and `port`, all through the one door. */
  listen(port: number, host: string, resolve?: Resolve): Promise<void>;
  /** Ends every public connection at once (past the drain time of a shutdown). */
  closeAllConnections(): void;
  /** What this replica can accept without the store, for readiness (src/ops/readiness.ts). */
  fromMemory(): FromMemory;
}

/** How long a closing connection's late request bytes are read and dropped so its last answer arrives (nginx: 5 s idle). */
const LINGER_MS = 2_000;

/**
 * Builds the gateway from its parts; `main.ts` listens. Every request goes through the one door
 * (`RequestDoor`): fastify serves only the gateway's own endpoints (docs/architecture.md).
 * No module-level state: everything with state is made here.
 */
export async function build(config: Config, deps: Deps): Promise<Gateway> {
  const now = deps.now ?? (() => new Date());
  // The metrics are made after the servers, so a dropped connection is counted through this late-bound hook.
  let dropped = () => {};
  const servers = new PublicServers(connectionLimits(config), { dropped: () => dropped() });
  const app = createFastify(config, deps, servers);
  // Before any route: it mirrors every path fastify serves, for the door.
  const ownEndpoints = new OwnEndpoints(app);
  const metrics = new Metrics({ routes: config.tables.routes.map((route) => route.name) });
  dropped = () => metrics.connectionDropped();
  metrics.setOpenConnections(() => servers.connections());
  metrics.setKeyCounter(() => deps.store.countKeysByStatus(now()));

  // The rate limits' own clock never goes backwards, unless a test steps the gateway's.
  const clockMs = deps.now === undefined ? () => performance.now() : () => now().getTime();
  const core = await buildCore(config, deps.store, app.log, metrics, now);
  const { redis, verifier, sessions, hasher, keys, usage, streams } = core;
  const limiter = rateLimiterOf(redis, metrics, clockMs, app.log);
  // Before Redis closes: the leases held are given back on its connection.
  app.addHook('onClose', async () => limiter.close());
  if (redis !== undefined) app.addHook('onClose', () => redis.close());
  if (deps.store.kind === 'postgres') {
    const stop = refreshEndedSessions({ store: deps.store, ended: core.ended, everyMs: config.env.KEY_CACHE_TTL, now, log: app.log });
    app.addHook('onClose', async () => stop());
  }
  // The tools' mirrored parameters (Mcp-Param-*), learnt by the MCP handler from the lists it relays (shared by replicas
  // through Redis), checked by the pipeline.
  const toolHeaders = new ToolParamHeaders({
    callable: new Set(config.tables.mcp.tools.keys()),
    shared:
      redis === undefined
        ? undefined
        : new RedisToolSchemas({ redis: redis.commands, prefix: redis.prefix, onError: (error) => app.log.debug({ err: error }, 'MCP tool schemas kept in this replica only') }),
  });
  const pipeline = new RequestPipeline({
    routes: compileRoutes(config.tables),
    tables: config.tables,
    authenticator: new Authenticator({ verifier, sessions, ended: core.ended, store: deps.store }),
    licence: config.licence,
    now,
    limiter,
    rateLimited: (limit) => metrics.rateLimited(limit),
    usage,
    observe: ({ allowed, code, credential, route, seconds }) => metrics.decision(allowed ? 'allow' : 'deny', code ?? 'allowed', credential, route ?? 'other', seconds),
    mcp: { allowedOrigins: new Set(config.env.MCP_ALLOWED_ORIGINS), toolHeaders },
  });
  await registerEndpoints(app, { config, store: deps.store, now, metrics, login: core.login, adminSessions: core.adminSessions, passwords: core.passwords, keys, guard: pipeline });
  const door = buildDoor(config, app, { pipeline, streams, metrics, redis, ownEndpoints, toolHeaders, drained: () => servers.furtherDrained() });
  servers.route(door);
  app.addHook('preClose', (done) => {
    // Fastify answers 503 from now on and stops its server accepting; the further servers stop with it.
    door.close();
    servers.stopFurther();
    done();
  });
  return {
    app,
    hasher,
    sessions,
    keys,
    verifier,
    usage,
    metrics,
    redis,
    initialPassword: core.initialPassword,
    listen: async (port, host, resolve) => {
      await app.listen({ port, host });
      const bound = app.server.address() as AddressInfo;
      await servers.listenFurther(host, bound.port, bound.address, resolve);
    },
    closeAllConnections: () => servers.closeAllConnections(),
    // Admin tokens are checked in memory unless the ended sessions may be stale (src/pipeline/authenticate.ts).
    fromMemory: () => ({ keys: verifier.holdsFreshState(), adminSessions: !verifier.degraded && core.ended.synced }),
  };
}

/** The rate limits' count: shared by the replicas through Redis when there is one, else this process's own. */
function rateLimiterOf(redis: RedisTier | undefined, metrics: Metrics, now: () => number, log: FastifyBaseLogger): RateLimiter {
  if (redis === undefined) return new LocalRateLimiter({ now });
  return redis.rateLimiter({ now, observe: { fallback: () => metrics.rateLimitFallback() }, onError: (error) => log.debug({ err: error }, 'rate limit counted by this replica alone: Redis did not answer') });
}

function connectionLimits({ env }: Config) {
  return {
    headersTimeoutMs: env.HEADERS_TIMEOUT,
    requestTimeoutMs: env.REQUEST_TIMEOUT,
    keepAliveTimeoutMs: env.KEEP_ALIVE_TIMEOUT,
    maxConnections: env.MAX_CONNECTIONS,
    lingerMs: LINGER_MS,
  };
}

/** Fastify, for the gateway's own endpoints only: the door hands it nothing else. */
function createFastify({ env }: Config, deps: Deps, servers: PublicServers): FastifyInstance {
  const app = Fastify({
    serverFactory: servers.factory,
    logger: deps.logger ?? {
      level: env.LOG_LEVEL,
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
    },
    // No line per request: the allow path logs nothing, denials log one line each (their own hook).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: env.BODY_LIMIT,
    // A client's x-request-id is kept when it is a plain token, so traces join up; anything else is replaced.
    requestIdHeader: false,
    genReqId: requestIdOf,
    return503OnClosing: true,
    clientErrorHandler,
    // A target fastify's router cannot decode (`%zz`) is refused before any hook runs: answer it as problem+json too.
    frameworkErrors: (error, request, reply) =>
      sendProblem(reply, new GatewayError('ambiguous_path', 'The request path has a malformed percent-encoding', { cause: error }), request),
  });
  // Every answer carries the request id; and Node keeps the first of two Authorization or Host
  // headers where another hop might read the last. One callback hook: no promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    if (isLingering(request.raw.socket)) {
      // Bytes a client sent after its connection was closed: never served.
      reply.hijack();
      request.raw.socket.destroy();
      return;
    }
    reply.header('x-request-id', request.id);
    try {
      assertSingleHeaders(request.raw.rawHeaders);
    } catch (error) {
      done(error as Error);
      return;
    }
    done();
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(() => {
    throw new GatewayError('not_found', 'No such endpoint');
  });
  app.removeContentTypeParser('text/plain');
  return app;
}

/** The parts with state behind the pipeline and the endpoints: hashing, sessions, keys, Redis, streams. */
export interface Core {
  hasher: Argon2Hasher;
  sessions: SessionTokens;
  login: LoginService;
  redis: RedisTier | undefined;
  usage: UsageRecorder;
  verifier: KeyVerifier;
  streams: OpenStreams;
  keys: KeyService;
  ended: EndedSessions;
  adminSessions: SessionService;
  passwords: PasswordChange;
  initialPassword: InitialPasswordFile;
}

async function buildCore(config: Config, store: Store, log: FastifyBaseLogger, metrics: Metrics, now: () => Date): Promise<Core> {
  const { env } = config;
  const hasher = new Argon2Hasher({ memoryKiB: env.ARGON2_MEMORY_KIB, timeCost: env.ARGON2_TIME_COST, parallelism: env.ARGON2_PARALLELISM, concurrency: env.ARGON2_CONCURRENCY });
  const secret = env.JWT_SECRET ?? (await store.getOrCreateSetting('jwt_secret', randomBytes(32).toString('base64url')));
  const sessions = new SessionTokens({ secret: new TextEncoder().encode(secret), ttlSeconds: env.ADMIN_SESSION_TTL, now });
  // Opened without waiting for Redis: with Redis away the gateway starts and serves through the store.
  const redis = env.REDIS_URL === undefined ? undefined : await RedisTier.open({ url: env.REDIS_URL, store, log, commandTimeoutMs: env.REDIS_COMMAND_TIMEOUT });
  // The admin sessions ended while their tokens live: read at start, then told by the revocation bus.
  // Every way this replica learns of an end goes through it, and ends the session's streams.
  // Streams and tunnels by credential: a key's end (the eviction below, on every replica before
  // it acknowledges the barrier), or a session's, cuts them before the answer that ended it leaves.
  const streams = new OpenStreams({ maxPerCredential: env.MAX_STREAMS_PER_KEY, now });
  const ended = new EndedSessions({ now: () => now().getTime(), tokenTtlMs: env.ADMIN_SESSION_TTL * 1000, onEnded: (id) => streams.closeSession(id) });
  ended.load(await store.listEndedAdminSessions(now()));
  const usage = new UsageRecorder({
    store,
    intervalMs: store.kind === 'embedded' ? EMBEDDED_USAGE_FLUSH_INTERVAL_MS : DEFAULT_USAGE_FLUSH_INTERVAL_MS,
    onError: (error) => log.warn({ err: error }, 'could not write last_used_at; kept for the next write'),
  });
  const verifier = new KeyVerifier({
    store,
    hasher,
    cacheSize: env.KEY_CACHE_SIZE,
    stateTtlMs: env.KEY_CACHE_TTL,
    now: () => now().getTime(),
    limiter: redis?.limiter('key_prefix', KEY_PREFIX_FAILURE_LIMIT, KEY_PREFIX_FAILURE_WINDOW_MS),
    probe: redis === undefined ? undefined : new RedisProbeGate({ redis: redis.commands, name: 'key_prefix', intervalMs: KEY_PREFIX_PROBE_INTERVAL_MS, prefix: redis.prefix }),
    shared: redis?.identity,
  });
  const revocations = startRevocations(verifier, streams, ended, redis, metrics, () => resyncEndedSessions(store, ended, now, log));
  const observe = (barrier: BarrierResult) => metrics.revocationBarrier(barrier.durationMs / 1000, barrier.missed);
  const keys = new KeyService({
    store,
    hasher,
    licenceLimit: config.licence.apiKeys,
    defaultRateLimit: env.DEFAULT_KEY_RATE_LIMIT ?? null,
    listener: createKeyStateListener({ evict: revocations.evict, bus: revocations.bus, observe }),
    now,
  });
  const adminSessions = new SessionService({ store, tokens: sessions, listener: createSessionEndListener({ ended, bus: revocations.bus, observe }), now });
  const login = new LoginService({
    store,
    hasher,
    sessions: adminSessions,
    limiter: redis?.limiter('login', LOGIN_FAILURE_LIMIT, LOGIN_FAILURE_WINDOW_MS) ?? new MemoryFailureLimiter({ limit: LOGIN_FAILURE_LIMIT, windowMs: LOGIN_FAILURE_WINDOW_MS }),
    onError: (error) => log.warn({ err: error }, 'admin password hash upgrade or login decoy refresh failed; retried later'),
  });
  const initialPassword = new InitialPasswordFile(env.DATA_DIR, (error) => log.warn({ err: error }, 'could not remove the initial admin password file'));
  const passwords = new PasswordChange({ login, hasher, store, sessions: adminSessions, initialPassword, now });
  exportVerifierStats(metrics, () => verifier.stats());
  exportArgon2Stats(metrics, () => hasher.stats());
  return { hasher, sessions, login, redis, usage, verifier, streams, keys, ended, adminSessions, passwords, initialPassword };
}


/**
 * How a change reaches this replica (a key's cached state and streams dropped, a session
 * ended) and, with Redis, every other replica: the revocation bus, degraded (state read from
 * the store on every request) until subscribed.
 */
function startRevocations(verifier: KeyVerifier, streams: OpenStreams, ended: EndedSessions, redis: RedisTier | undefined, metrics: Metrics, resync: () => void) {
  const evict = (keyId: number) => {
    verifier.evict(keyId);
    streams.closeKey(keyId);
  };
  const bus = redis?.startRevocations({
    evict,
    endSession: (sessionId) => void ended.end(sessionId),
    setDegraded: (degraded) => {
      verifier.setDegraded(degraded);
      // Ends announced while this replica could not hear them are read from the store once it can again;
      // until then, each admin request asks the store.
      ended.unsync();
      if (!degraded) resync();
      // Entering: evictions may be missed from now on, so streams authorized on the trusted cache are cut.
      // Leaving: the streams still open were all opened while evictions could be missed, and one of
      // their keys may have been revoked meanwhile. Either way each client reconnects and is checked again.
      streams.closeApiKeyStreams();
    },
  });
  redis?.onStatus((up) => metrics.setDependencyUp('redis', up));
  return { evict, bus };
}

/** The one door and what it forwards with: the upstream, the MCP handler, the forwarder. */
function buildDoor(
  config: Config,
  app: FastifyInstance,
  parts: {
    pipeline: RequestPipeline;
    streams: OpenStreams;
    metrics: Metrics;
    redis: RedisTier | undefined;
    ownEndpoints: OwnEndpoints;
    toolHeaders: ToolParamHeaders;
    /** Resolves once the further servers' requests have ended: the upstream stays open until then. */
    drained: () => Promise<void>;
  },
): RequestDoor {
  const { env } = config;
  const { pipeline, streams, metrics, redis } = parts;
  // The way upstream for the whole gateway (generic forwarding, WebSockets, MCP): ordinary requests and streams on pools of their own.
  const upstream = new Upstream({
    url: env.UPSTREAM_URL,
    timeoutMs: env.UPSTREAM_TIMEOUT,
    // Every stream holds a client connection, so streams never need more upstream connections than that.
    streamConnections: env.MAX_CONNECTIONS,
    observed: (route, status, seconds) => metrics.upstream(route, status, seconds),
    streams,
  });
  app.addHook('preClose', (done) => {
    upstream.endTunnels();
    done();
  });
  app.addHook('onClose', async () => {
    await parts.drained();
    await upstream.close();
  });
  const identity = new IdentityHeaderValues();
  // MCP sessions are bound to their key, shared through Redis when set.
  const bindings: SessionBindings =
    redis === undefined
      ? new MemorySessionBindings()
      : new RedisSessionBindings({ redis: redis.commands, prefix: redis.prefix, onError: (error) => app.log.debug({ err: error }, 'MCP session binding kept in this replica only') });
  const mcp = createMcpHandler({
    upstream,
    forwardAuthorization: env.FORWARD_AUTHORIZATION,
    bodyLimit: env.BODY_LIMIT,
    maxBatch: env.MCP_MAX_BATCH,
    tables: config.tables,
    licence: config.licence,
    pipeline,
    grants: new ToolGrants(config.tables),
    toolHeaders: parts.toolHeaders,
    identity,
    bindings,
    log: app.log,
    streams,
  });
  const forwarder = new Forwarder({ upstream, forwardAuthorization: env.FORWARD_AUTHORIZATION, bodyLimit: env.BODY_LIMIT, streams, identity });
  return new RequestDoor({ ownEndpoints: parts.ownEndpoints, fastify: app.routing, pipeline, forwarder, mcp, bodyLimit: env.BODY_LIMIT, log: app.log });
}
