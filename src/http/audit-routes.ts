import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { RequestPipeline } from '../pipeline/request-pipeline.ts';
import type { AuditTrail } from '../audit/audit-trail.ts';
import { toAuditRecord } from '../audit/record.ts';
import { requireAdmin } from './admin-guard.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { methodNotAllowed } from './method-not-allowed.ts';

export const AUDIT_EVENTS_PATH = '/api/v1/audit-events';
export const AUDIT_PAGE_DEFAULT = 50;
export const AUDIT_PAGE_MAX = 500;

/** A query parameter holding a canonical positive integer (`5`, not `05`, `+5` or `5.0`). */
const positiveIntegerParam = (max: number) =>
  z
    .string()
    .regex(/^[1-9][0-9]{0,15}$/, 'must be a positive integer')
    .transform(Number)
    .pipe(z.number().int().min(1).max(max, `must be at most ${max}`));

/** The query of `GET /api/v1/audit-events`; also the source of its OpenAPI parameters. */
export const auditQuerySchema = z.strictObject({
  limit: positiveIntegerParam(AUDIT_PAGE_MAX)
    .optional()
    .meta({ description: `How many events to return, newest first (default ${AUDIT_PAGE_DEFAULT})`, default: AUDIT_PAGE_DEFAULT }),
  before: positiveIntegerParam(Number.MAX_SAFE_INTEGER)
    .optional()
    .meta({ description: 'Only events with a smaller id: the last id of the previous page' }),
});

/** `GET /api/v1/audit-events`: admin token only; newest first, paged with `limit` and `before`. */
export function registerAuditRoutes(app: FastifyInstance, deps: { audit: AuditTrail; guard: Pick<RequestPipeline, 'authorizeAdmin'> }): void {
  app.get(AUDIT_EVENTS_PATH, { onRequest: async (request) => void (await requireAdmin(request, deps.guard)) }, async (request, reply) => {
    const query = auditQuerySchema.safeParse(request.query);
    if (!query.success) {
      const errors = query.error.issues.map((issue) => ({
        field: issue.path.length ? issue.path.join('.') : issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : 'query',
        message: issue.code === 'unrecognized_keys' ? 'unknown parameter' : issue.message,
      }));
      throw new GatewayError('validation_failed', errors.map((error) => `${error.field}: ${error.message}`).join('; '), { errors });
    }
    const { limit = AUDIT_PAGE_DEFAULT, before } = query.data;
    const rows = await deps.audit.list(before === undefined ? { limit } : { limit, before });
    return reply.header('cache-control', 'no-store').send(rows.map(toAuditRecord));
  });
  methodNotAllowed(app, AUDIT_EVENTS_PATH, ['GET']);
}
