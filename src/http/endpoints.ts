import type { FastifyInstance } from 'fastify';
import type { LoginService } from '../admin/login.ts';
import { AuditTrail } from '../audit/audit-trail.ts';
import type { Config } from '../config/load.ts';
import type { KeyService } from '../keys/key-service.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { RequestPipeline } from '../pipeline/request-pipeline.ts';
import type { Store } from '../store/store.ts';
import type { PasswordChange } from '../admin/password-change.ts';
import type { SessionService } from '../admin/session-service.ts';
import { VERSION } from '../version.ts';
import { registerApiKeyRoutes } from './api-key-routes.ts';
import { registerAuditRoutes } from './audit-routes.ts';
import { registerAuthRoutes } from './auth-routes.ts';
import { registerFavicon } from './favicon.ts';
import { registerOpenApi } from './openapi.ts';
import { registerSessionRoutes } from './session-routes.ts';

export interface EndpointDeps {
  config: Config;
  store: Store;
  now: () => Date;
  metrics: Metrics;
  login: LoginService;
  adminSessions: SessionService;
  passwords: PasswordChange;
  keys: KeyService;
  /** The admin guard: the one pipeline's decision for an admin-only route. */
  guard: Pick<RequestPipeline, 'authorizeAdmin'>;
}

/**
 * The gateway's own endpoints, served by fastify: admin login, API-key management, the audit
 * trail, the OpenAPI document and `/docs` (and the 404 for browsers' `/favicon.ico`). None of them forwards; each admin-only one is guarded
 * by the same pipeline as forwarded requests. Their events go to the log, the metrics and the audit trail:
 * a key's change is stored with its event by the key service, before the answer; logins are
 * recorded behind the request and flushed on close (issue 22, item 4).
 */
export async function registerEndpoints(app: FastifyInstance, deps: EndpointDeps): Promise<void> {
  const { config, metrics, now } = deps;
  const audit = new AuditTrail({ store: deps.store, now, onError: (error) => app.log.error({ err: error }, 'could not write an audit event') });
  app.addHook('onClose', () => audit.flush());
  registerAuthRoutes(app, deps.login, {
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
  registerSessionRoutes(app, { sessions: deps.adminSessions, passwords: deps.passwords, guard: deps.guard });
  registerApiKeyRoutes(app, {
    keys: deps.keys,
    guard: deps.guard,
    knownScopes: config.knownScopes,
    now,
    events: {
      keyCreated: (admin, keyId, address) => {
        app.log.info({ event: 'key_created', adminId: admin.adminId, keyId, address }, 'API key created');
      },
      keyUpdated: (admin, keyId, address) => {
        app.log.info({ event: 'key_updated', adminId: admin.adminId, keyId, address }, 'API key updated');
      },
      keyRotated: (admin, keyId, toKeyId, address) => {
        app.log.info({ event: 'key_rotated', adminId: admin.adminId, keyId, toKeyId, address }, 'API key rotated');
      },
      keyRevoked: (admin, keyId, address) => {
        app.log.info({ event: 'key_revoked', adminId: admin.adminId, keyId, address }, 'API key revoked');
      },
    },
  });
  registerAuditRoutes(app, { audit, guard: deps.guard });
  registerFavicon(app, config.tables);
  const { env } = config;
  await registerOpenApi(app, { knownScopes: config.knownScopes, version: VERSION, openapi: env.OPENAPI_ENABLED, docs: env.DOCS_ENABLED });
}
