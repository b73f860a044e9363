import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { LoginService } from '../admin/login.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { encodableString, storableString } from '../store/storable-text.ts';
import { methodNotAllowed } from './method-not-allowed.ts';

export const LOGIN_PATH = '/api/v1/auth/login';

export const loginBodySchema = z.strictObject({
  // Looked up in the store: what it cannot hold is refused before the query (never a 500).
  email: storableString().min(1).max(320),
  password: encodableString().min(1).max(1024),
});

export const loginResponseSchema = z.object({
  token: z.string(),
  token_type: z.literal('Bearer'),
  expires_at: z.iso.datetime(),
  expires_in: z.number().int(),
});

export interface LoginEvents {
  loginSucceeded(adminId: number, clientAddress: string): void;
  loginFailed(adminId: number | null, clientAddress: string): void;
  /** Answered 429 before any password work. */
  loginThrottled?(clientAddress: string): void;
}

export function registerAuthRoutes(app: FastifyInstance, login: LoginService, events: LoginEvents): void {
  app.post(LOGIN_PATH, async (request, reply) => {
    const body = loginBodySchema.safeParse(request.body);
    if (!body.success) {
      throw new GatewayError('validation_failed', 'Send {"email": "…", "password": "…"}', {
        errors: body.error.issues.map((issue) => ({ field: issue.path.join('.') || 'body', message: issue.message })),
      });
    }
    const outcome = await login.login(body.data.email, body.data.password, request.ip).catch((error: unknown) => {
      if (error instanceof GatewayError && error.code === 'rate_limited') events.loginThrottled?.(request.ip);
      throw error;
    });
    if (!outcome.ok) {
      events.loginFailed(outcome.adminId, request.ip);
      throw new GatewayError('invalid_credential', 'Invalid email or password');
    }
    events.loginSucceeded(outcome.adminId, request.ip);
    const { session } = outcome;
    return reply.header('cache-control', 'no-store').send({
      token: session.token,
      token_type: 'Bearer',
      expires_at: session.expiresAt.toISOString(),
      expires_in: session.expiresIn,
    });
  });
  methodNotAllowed(app, LOGIN_PATH, ['POST']);
}
