import type { FastifyRequest } from 'fastify';
import { errorOf } from '../policy/denial.ts';
import type { AdminPrincipal } from '../policy/principal.ts';
import type { RequestPipeline } from '../pipeline/request-pipeline.ts';

/**
 * The admin-only endpoints' guard: the one pipeline's decision for a route that needs an admin
 * session token (an API key is a 401 `wrong_credential_type` whatever its scopes, decided by its
 * shape alone: docs/api-keys.md). A refusal is thrown for fastify's error handler to render.
 */
export async function requireAdmin(request: FastifyRequest, pipeline: Pick<RequestPipeline, 'authorizeAdmin'>): Promise<AdminPrincipal> {
  const verdict = await pipeline.authorizeAdmin(request.raw);
  if ('allow' in verdict) throw errorOf(verdict);
  return verdict;
}
