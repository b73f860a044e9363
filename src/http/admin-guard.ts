import type { FastifyRequest } from 'fastify';
import type { SessionTokens } from '../admin/sessions.ts';
import { extractBearer } from '../credentials/bearer.ts';
import type { AdminPrincipal } from '../policy/principal.ts';
import { GatewayError } from '../errors/gateway-error.ts';

/**
 * Admin-only endpoints accept an admin session token and nothing else: an API key is a 401
 * `wrong_credential_type` whatever its scopes (docs/api-keys.md), decided by its shape alone.
 */
export async function requireAdmin(request: FastifyRequest, sessions: SessionTokens): Promise<AdminPrincipal> {
  const credential = extractBearer(request.headers.authorization);
  switch (credential.kind) {
    case 'none':
      throw new GatewayError('missing_credential', 'An admin session token is required');
    case 'api_key':
      throw new GatewayError('wrong_credential_type', 'An API key cannot be used here; log in as an admin');
    case 'unknown':
      throw new GatewayError('invalid_credential', 'Invalid admin token');
    case 'jwt': {
      const { adminId } = await sessions.verify(credential.token);
      return { kind: 'admin', adminId };
    }
  }
}
