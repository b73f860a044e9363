import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { MIN_PASSWORD_LENGTH, type PasswordChange } from '../admin/password-change.ts';
import type { SessionService } from '../admin/session-service.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { encodableString } from '../store/storable-text.ts';
import type { Actor } from '../keys/key-service.ts';
import type { RequestPipeline } from '../pipeline/request-pipeline.ts';
import type { AdminPrincipal } from '../policy/principal.ts';
import { requireAdmin } from './admin-guard.ts';
import { methodNotAllowed } from './method-not-allowed.ts';

export const LOGOUT_PATH = '/api/v1/auth/logout';
export const SESSIONS_PATH = '/api/v1/auth/sessions';
export const PASSWORD_PATH = '/api/v1/auth/password';

/** Session ids are the tokens' `jti`s: UUIDs as issued, or any token-safe id an older token carried. */
export const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/;

export const passwordBodySchema = z.strictObject({
  current_password: encodableString().min(1).max(1024),
  // The rules that need the current password too are the service's (password-change.ts): described here, checked there.
  new_password: encodableString().min(1).max(1024).meta({ description: `At least ${MIN_PASSWORD_LENGTH} characters, and not the current password` }),
});

export const sessionSchema = z.strictObject({
  id: z.string(),
  created_at: z.iso.datetime(),
  expires_at: z.iso.datetime(),
  client_address: z.string().nullable(),
  current: z.boolean().meta({ description: 'The session of the token that asked' }),
});

export interface SessionRouteDeps {
  sessions: SessionService;
  passwords: PasswordChange;
  guard: Pick<RequestPipeline, 'authorizeAdmin'>;
}

/** Logout, the caller's sessions, ending one, and a password change: admin token only, checked before the body is read. */
export function registerSessionRoutes(app: FastifyInstance, deps: SessionRouteDeps): void {
  const { sessions, passwords, guard } = deps;
  const admins = new WeakMap<FastifyRequest, AdminPrincipal>();
  const authenticate = async (request: FastifyRequest) => {
    admins.set(request, await requireAdmin(request, guard));
  };
  const adminOf = (request: FastifyRequest) => admins.get(request)!;
  const actorOf = (request: FastifyRequest): Actor => ({ kind: 'admin', id: String(adminOf(request).adminId), address: request.ip });

  app.post(LOGOUT_PATH, { onRequest: authenticate }, async (request, reply) => {
    await sessions.logout(adminOf(request), actorOf(request));
    return reply.code(204).send();
  });

  app.get(SESSIONS_PATH, { onRequest: authenticate }, async (request, reply) => {
    return reply.header('cache-control', 'no-store').send(await sessions.list(adminOf(request)));
  });

  app.delete(`${SESSIONS_PATH}/:id`, { onRequest: authenticate }, async (request, reply) => {
    // The raw target, as for key ids: an encoded id is not quietly another.
    const id = request.url.slice(SESSIONS_PATH.length + 1).split('?')[0]!;
    if (!SESSION_ID.test(id)) throw new GatewayError('not_found', 'No such session of yours');
    await sessions.end(adminOf(request), id, actorOf(request));
    return reply.code(204).send();
  });

  app.post(PASSWORD_PATH, { onRequest: authenticate }, async (request, reply) => {
    const body = passwordBodySchema.safeParse(request.body);
    if (!body.success) {
      const errors = body.error.issues.map((issue) => ({ field: issue.path.join('.') || 'body', message: issue.code === 'unrecognized_keys' ? 'unknown field' : issue.message }));
      throw new GatewayError('validation_failed', 'Send {"current_password": "…", "new_password": "…"}', { errors });
    }
    await passwords.change(adminOf(request), body.data.current_password, body.data.new_password, actorOf(request));
    return reply.code(204).send();
  });

  methodNotAllowed(app, LOGOUT_PATH, ['POST']);
  methodNotAllowed(app, SESSIONS_PATH, ['GET']);
  methodNotAllowed(app, `${SESSIONS_PATH}/:id`, ['DELETE']);
  methodNotAllowed(app, PASSWORD_PATH, ['POST']);
}
