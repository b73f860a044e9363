import { randomBytes } from 'node:crypto';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { LoginService, LOGIN_FAILURE_LIMIT, LOGIN_FAILURE_WINDOW_MS } from './admin/login.ts';
import { SessionTokens } from './admin/sessions.ts';
import type { Config } from './config/load.ts';
import { Argon2Hasher } from './crypto/argon2.ts';
import { registerApiKeyRoutes } from './http/api-key-routes.ts';
import { registerAuthRoutes } from './http/auth-routes.ts';
import { errorHandler, sendProblem } from './http/error-handler.ts';
import { GatewayError } from './errors/gateway-error.ts';
import { KeyService, type KeyStateListener } from './keys/key-service.ts';
import { MemoryFailureLimiter } from './limits/failure-limiter.ts';
import { Metrics } from './ops/metrics.ts';
import { compileRoutes } from './policy/routes.ts';
import { createAuthorizer, type AuthorizerDeps } from './proxy/authorize.ts';
import { registerForwarding } from './proxy/forward.ts';
import { createFastLane } from './proxy/fast-lane.ts';
import { ForwardedRoutes } from './proxy/forwarded-routes.ts';
import { handedOverRequestId } from './proxy/hand-over.ts';
import { requestIdOf } from './http/request-id.ts';
import { Upstream } from './proxy/upstream.ts';
import { OpenStreams } from './proxy/open-streams.ts';
import { createMcpHandler, registerMcpRoutes } from './mcp/mcp-handler.ts';
import { MemorySessionBindings, type SessionBindings } from './mcp/session-bindings.ts';
import { RedisSessionBindings } from './mcp/redis-session-bindings.ts';
import { assertSingleHeaders } from './proxy/raw-headers.ts';
import type { Store } from './store/store.ts';
import { createKeyStateListener } from './redis/key-state-listener.ts';
import { RedisTier } from './redis/redis-tier.ts';
import { DEFAULT_USAGE_FLUSH_INTERVAL_MS, EMBEDDED_USAGE_FLUSH_INTERVAL_MS, UsageRecorder } from './keys/usage-recorder.ts';
import { KeyVerifier, KEY_PREFIX_FAILURE_LIMIT, KEY_PREFIX_FAILURE_WINDOW_MS, KEY_PREFIX_PROBE_INTERVAL_MS } from './verify/key-verifier.ts';
import { RedisProbeGate } from './redis/probe-gate.ts';
import { exportArgon2Stats } from './ops/argon2-metrics.ts';
import { clientErrorHandler } from './http/client-error.ts';
import { installLingeringClose, isLingering } from './http/lingering-close.ts';
import { publicServer } from './http/public-server.ts';
import { exportVerifierStats } from './ops/verifier-metrics.ts';
import { AuditTrail } from './audit/audit-trail.ts';
import { registerAuditRoutes } from './http/audit-routes.ts';
import { registerOpenApi } from './http/openapi.ts';
import { VERSION } from './version.ts';

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
}

/** How long a closing connection's late request bytes are read and dropped so its last answer arrives (nginx: 5 s idle). */
const LINGER_MS = 2_000;

/** Builds the public fastify instance from its parts; `main.ts` listens. No module-level state. */
export async function build(config: Config, deps: Deps): Promise<Gateway> {
  const { env } = config;
  const now = deps.now ?? (() => new Date());
  // Built before the metrics exist, so a dropped connection is counted through this late-bound hook.
  let connectionDropped = () => {};
  const server = publicServer(
    {
      headersTimeoutMs: env.HEADERS_TIMEOUT,
      requestTimeoutMs: env.REQUEST_TIMEOUT,
      keepAliveTimeoutMs: env.KEEP_ALIVE_TIMEOUT,
      maxConnections: env.MAX_CONNECTIONS,
    },
    { dropped: () => connectionDropped() },
  );
  const app = Fastify({
    serverFactory: server.factory,
    logger: deps.logger ?? {
      level: env.LOG_LEVEL,
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
    },
    // No line per request: the allow path logs nothing, denials log one line each (their own hook).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: env.BODY_LIMIT,
    // A client's x-request-id is kept when it is a plain token, so traces join up; anything else is replaced.
    requestIdHeader: false,
    genReqId: (request) => handedOverRequestId(request) ?? requestIdOf(request),
    return503OnClosing: true,
    clientErrorHandler,
    // A target fastify's router cannot decode (`%zz`) is refused before any hook runs: answer it as problem+json too.
    frameworkErrors: (error, request, reply) =>
      sendProblem(reply, new GatewayError('ambiguous_path', 'The request path has a malformed percent-encoding', { cause: error }), request),
  });
  // Before any route: it mirrors every route fastify registers, to tell the fast lane what it may serve.
  const forwardedRoutes = new ForwardedRoutes(app);
  // Every answer carries the request id; and Node keeps the first of two Authorization or Host
  // headers where another hop might read the last. One callback hook: no promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    if (isLingering(request.raw.socket)) {
      // Bytes a client sent after its connection was closed: never served, never forwarded.
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
  installLingeringClose(app.server, LINGER_MS);
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(() => {
    throw new GatewayError('not_found', 'No such endpoint');
  });
  app.removeContentTypeParser('text/plain');

  const hasher = new Argon2Hasher({
    memoryKiB: env.ARGON2_MEMORY_KIB,
    timeCost: env.ARGON2_TIME_COST,
    parallelism: env.ARGON2_PARALLELISM,
    concurrency: env.ARGON2_CONCURRENCY,
  });
  const secret = env.JWT_SECRET ?? (await deps.store.getOrCreateSetting('jwt_secret', randomBytes(32).toString('base64url')));
  const sessions = new SessionTokens({ secret: new TextEncoder().encode(secret), ttlSeconds: env.ADMIN_SESSION_TTL, now });
  // Opened without waiting for Redis: with Redis away the gateway starts and serves through the store.
  const redis = env.REDIS_URL === undefined ? undefined : await RedisTier.open({ url: env.REDIS_URL, store: deps.store, log: app.log });
  if (redis !== undefined) app.addHook('onClose', () => redis.close());
  const login = new LoginService({
    store: deps.store,
    hasher,
    sessions,
    limiter:
      redis?.limiter('login', LOGIN_FAILURE_LIMIT, LOGIN_FAILURE_WINDOW_MS) ??
      new MemoryFailureLimiter({ limit: LOGIN_FAILURE_LIMIT, windowMs: LOGIN_FAILURE_WINDOW_MS }),
    onError: (error) => app.log.warn({ err: error }, 'admin password hash upgrade or login decoy refresh failed; retried later'),
  });
  const metrics = new Metrics({ routes: config.tables.routes.map((route) => route.name) });
  connectionDropped = () => metrics.connectionDropped();
  metrics.setOpenConnections(
    () => new Promise((resolve, reject) => app.server.getConnections((error, count) => (error ? reject(error) : resolve(count)))),
  );
  metrics.setKeyCounter(() => deps.store.countKeysByStatus(now()));
  const usage = new UsageRecorder({
    store: deps.store,
    intervalMs: deps.store.kind === 'embedded' ? EMBEDDED_USAGE_FLUSH_INTERVAL_MS : DEFAULT_USAGE_FLUSH_INTERVAL_MS,
    onError: (error) => app.log.warn({ err: error }, 'could not write last_used_at; kept for the next write'),
  });
  const verifier = new KeyVerifier({
    store: deps.store,
    hasher,
    usage,
    cacheSize: env.KEY_CACHE_SIZE,
    stateTtlMs: env.KEY_CACHE_TTL,
    now: () => now().getTime(),
    limiter: redis?.limiter('key_prefix', KEY_PREFIX_FAILURE_LIMIT, KEY_PREFIX_FAILURE_WINDOW_MS),
    probe:
      redis === undefined
        ? undefined
        : new RedisProbeGate({ redis: redis.commands, name: 'key_prefix', intervalMs: KEY_PREFIX_PROBE_INTERVAL_MS, prefix: redis.prefix }),
    shared: redis?.identity,
  });
  // Streams and tunnels by credential: a key's end (the eviction below, on every replica before
  // it acknowledges the barrier) cuts them before the answer that ended it leaves.
  const streams = new OpenStreams({ maxPerCredential: env.MAX_STREAMS_PER_KEY, now });
  const evict = (keyId: number) => {
    verifier.evict(keyId);
    streams.closeKey(keyId);
  };
  // Degraded (state read from the store on every request) until subscribed to the revocation channel.
  const revocations = redis?.startRevocations({
    evict,
    setDegraded: (degraded) => {
      verifier.setDegraded(degraded);
      // Entering: evictions may be missed from now on, so streams authorized on the trusted cache are cut.
      // Leaving: the streams still open were all opened while evictions could be missed, and one of
      // their keys may have been revoked meanwhile. Either way each client reconnects and is checked again.
      streams.closeApiKeyStreams();
    },
  });
  redis?.onStatus((up) => metrics.setDependencyUp('redis', up));
  const listener: KeyStateListener = createKeyStateListener({
    evict,
    bus: revocations,
    observe: (barrier) => metrics.revocationBarrier(barrier.durationMs / 1000, barrier.missed),
  });
  const keys = new KeyService({ store: deps.store, hasher, licenceLimit: config.licence.apiKeys, listener, now });

  exportVerifierStats(metrics, () => verifier.stats());
  exportArgon2Stats(metrics, () => hasher.stats());
  const audit = new AuditTrail({
    store: deps.store,
    now,
    onError: (error) => app.log.error({ err: error }, 'could not write an audit event'),
  });
  app.addHook('onClose', () => audit.flush());
  registerAuthRoutes(app, login, {
    loginThrottled: (address) => {
      metrics.login('throttled');
      metrics.throttled('login');
      app.log.warn({ event: 'login_throttled', address }, 'admin login throttled');
    },
    loginSucceeded: (adminId, address) => {
      metrics.login('success');
      app.log.info({ event: 'login_succeeded', adminId, address }, 'admin logged in');
      audit.record({ action: 'login_succeeded', actorKind: 'admin', actorId: String(adminId), subjectId: String(adminId), clientAddress: address });
    },
    loginFailed: (adminId, address) => {
      metrics.login('failure');
      app.log.warn({ event: 'login_failed', adminId, address }, 'admin login failed');
      // adminId is null for an unknown email; the email itself is not kept (it may be a mistyped password).
      audit.record({ action: 'login_failed', actorKind: null, actorId: null, subjectId: adminId === null ? null : String(adminId), clientAddress: address });
    },
  });
  registerApiKeyRoutes(app, {
    keys,
    sessions,
    knownScopes: config.knownScopes,
    now,
    events: {
      keyCreated: (admin, keyId, address) => {
        app.log.info({ event: 'key_created', adminId: admin.adminId, keyId, address }, 'API key created');
        audit.record({ action: 'key_created', actorKind: 'admin', actorId: String(admin.adminId), subjectId: String(keyId), clientAddress: address });
      },
      keyRevoked: (admin, keyId, address) => {
        app.log.info({ event: 'key_revoked', adminId: admin.adminId, keyId, address }, 'API key revoked');
        audit.record({ action: 'key_revoked', actorKind: 'admin', actorId: String(admin.adminId), subjectId: String(keyId), clientAddress: address });
      },
    },
  });
  registerAuditRoutes(app, { audit, sessions });
  await registerOpenApi(app, { knownScopes: config.knownScopes, version: VERSION, openapi: env.OPENAPI_ENABLED, docs: env.DOCS_ENABLED });

  const authorizerDeps = { routes: compileRoutes(config.tables), tables: config.tables, verifier, sessions, licence: config.licence, now };
  const observeDecision: AuthorizerDeps['observe'] = ({ allowed, code, credential, route, seconds }) =>
    metrics.decision(allowed ? 'allow' : 'deny', code ?? 'allowed', credential, route ?? 'other', seconds);
  const authorize = createAuthorizer({ ...authorizerDeps, observe: observeDecision });
  // The way upstream for the whole gateway (generic forwarding, WebSockets, MCP): ordinary requests and streams on pools of their own.
  const upstream = new Upstream({
    url: env.UPSTREAM_URL,
    timeoutMs: env.UPSTREAM_TIMEOUT,
    // Every stream holds a client connection, so streams never need more upstream connections than that.
    streamConnections: env.MAX_CONNECTIONS,
    observed: (route, status, seconds) => metrics.upstream(route, status, seconds),
    streams,
  });
  app.addHook('onClose', () => upstream.close());
  const forward = registerForwarding(app, { upstream, forwardAuthorization: env.FORWARD_AUTHORIZATION, bodyLimit: env.BODY_LIMIT, authorize, streams });
  // The MCP paths: messages decided before forwarding, sessions bound to their key (shared through Redis when set).
  const bindings: SessionBindings =
    redis === undefined
      ? new MemorySessionBindings()
      : new RedisSessionBindings({
          redis: redis.commands,
          prefix: redis.prefix,
          onError: (error) => app.log.debug({ err: error }, 'MCP session binding kept in this replica only'),
        });
  const mcp = createMcpHandler({
    upstream,
    forwardAuthorization: env.FORWARD_AUTHORIZATION,
    bodyLimit: env.BODY_LIMIT,
    maxBatch: env.MCP_MAX_BATCH,
    tables: config.tables,
    licence: config.licence,
    now,
    // Observed once per request by the handler, after the messages are decided.
    authorize: createAuthorizer(authorizerDeps),
    bindings,
    log: app.log,
    streams,
    observe: observeDecision,
  });
  registerMcpRoutes(app, mcp);
  // The allow path of a cached credential and every MCP request skip fastify; fastify serves the
  // rest, and every request on a secondary binding.
  const lane = createFastLane({ routes: forwardedRoutes, authorize, forward, bodyLimit: env.BODY_LIMIT, fastify: app.routing, log: app.log, mcp });
  server.route(lane.listener);
  app.addHook('preClose', (done) => {
    lane.close();
    done();
  });
  return { app, hasher, sessions, keys, verifier, usage, metrics, redis };
}
