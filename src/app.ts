import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { LoginService, LOGIN_FAILURE_LIMIT, LOGIN_FAILURE_WINDOW_MS } from './admin/login.ts';
import { SessionTokens } from './admin/sessions.ts';
import type { Config } from './config/load.ts';
import { Argon2Hasher } from './crypto/argon2.ts';
import { registerApiKeyRoutes } from './http/api-key-routes.ts';
import { registerAuthRoutes } from './http/auth-routes.ts';
import { errorHandler, sendProblem } from './http/error-handler.ts';
import { GatewayError } from './http/errors.ts';
import { KeyService, type KeyStateListener } from './keys/key-service.ts';
import { MemoryFailureLimiter } from './limits/failure-limiter.ts';
import { Metrics } from './ops/metrics.ts';
import { compileRoutes } from './policy/routes.ts';
import { createAuthorizer, type Authorized } from './proxy/authorize.ts';
import { registerForwarding } from './proxy/forward.ts';
import { assertSingleHeaders } from './proxy/raw-headers.ts';
import type { Store } from './store/store.ts';
import { UsageRecorder } from './keys/usage-recorder.ts';
import { KeyVerifier } from './verify/key-verifier.ts';
import { clientErrorHandler } from './http/client-error.ts';
import { exportVerifierStats } from './ops/verifier-metrics.ts';

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
}

const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

function requestIdOf(request: IncomingMessage): string {
  const offered = request.headers['x-request-id'];
  return typeof offered === 'string' && REQUEST_ID.test(offered) ? offered : randomUUID();
}

/** Builds the public fastify instance from its parts; `main.ts` listens. No module-level state. */
export async function build(config: Config, deps: Deps): Promise<Gateway> {
  const { env } = config;
  const now = deps.now ?? (() => new Date());
  const app = Fastify({
    logger: deps.logger ?? {
      level: env.LOG_LEVEL,
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
    },
    disableRequestLogging: true,
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
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // Node keeps the first of two Authorization or Host headers, another hop might read the last.
  app.addHook('onRequest', async (request) => assertSingleHeaders(request.raw.rawHeaders));
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
  const login = new LoginService({
    store: deps.store,
    hasher,
    sessions,
    limiter: new MemoryFailureLimiter({ limit: LOGIN_FAILURE_LIMIT, windowMs: LOGIN_FAILURE_WINDOW_MS }),
  });
  const metrics = new Metrics({ routes: config.tables.routes.map((route) => route.name) });
  metrics.setKeyCounter(() => deps.store.countKeysByStatus(now()));
  const usage = new UsageRecorder({
    store: deps.store,
    onError: (error) => app.log.warn({ err: error }, 'could not write last_used_at; kept for the next write'),
  });
  const verifier = new KeyVerifier({
    store: deps.store,
    hasher,
    usage,
    cacheSize: env.KEY_CACHE_SIZE,
    stateTtlMs: env.KEY_CACHE_TTL,
    now: () => now().getTime(),
  });
  const listener: KeyStateListener = {
    keyChanged: async (keyId) => verifier.evict(keyId),
  };
  const keys = new KeyService({ store: deps.store, hasher, licenceLimit: config.licence.apiKeys, listener, now });

  exportVerifierStats(metrics, () => verifier.stats());
  registerAuthRoutes(app, login, {
    loginThrottled: (address) => {
      metrics.login('throttled');
      metrics.throttled('login');
      app.log.warn({ event: 'login_throttled', address }, 'admin login throttled');
    },
    loginSucceeded: (adminId, address) => {
      metrics.login('success');
      app.log.info({ event: 'login_succeeded', adminId, address }, 'admin logged in');
    },
    loginFailed: (adminId, address) => {
      metrics.login('failure');
      app.log.warn({ event: 'login_failed', adminId, address }, 'admin login failed');
    },
  });
  registerApiKeyRoutes(app, {
    keys,
    sessions,
    knownScopes: config.knownScopes,
    now,
    events: {
      keyCreated: (admin, keyId, address) =>
        app.log.info({ event: 'key_created', adminId: admin.adminId, keyId, address }, 'API key created'),
      keyRevoked: (admin, keyId, address) =>
        app.log.info({ event: 'key_revoked', adminId: admin.adminId, keyId, address }, 'API key revoked'),
    },
  });

  const authorize = createAuthorizer({
    routes: compileRoutes(config.tables),
    tables: config.tables,
    verifier,
    sessions,
    licence: config.licence,
    now,
    observe: ({ allowed, code, credential, route, seconds }) =>
      metrics.decision(allowed ? 'allow' : 'deny', code ?? 'allowed', credential, route ?? 'other', seconds),
  });
  await registerForwarding(app, {
    upstreamUrl: env.UPSTREAM_URL,
    upstreamTimeoutMs: env.UPSTREAM_TIMEOUT,
    forwardAuthorization: env.FORWARD_AUTHORIZATION,
    bodyLimit: env.BODY_LIMIT,
    authorize: async (request): Promise<Authorized> => {
      const authorized = await authorize(request);
      // MCP placeholder: until MCP messages are inspected, nothing is forwarded to the tool server.
      if (authorized.route.mcp !== undefined) {
        throw new GatewayError('method_not_allowed_for_key', 'MCP requests are not forwarded by this version');
      }
      return authorized;
    },
    upstreamObserved: (route, status, seconds) => metrics.upstream(route, status, seconds),
  });
  return { app, hasher, sessions, keys, verifier, usage, metrics };
}
