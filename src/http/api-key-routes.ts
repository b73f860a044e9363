import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RequestPipeline } from '../pipeline/request-pipeline.ts';
import { createKeyBodySchema, parseCreateKeyRequest } from '../keys/create-request.ts';
import type { Actor, KeyService } from '../keys/key-service.ts';
import { toRecord } from '../keys/record.ts';
import type { AdminPrincipal } from '../policy/principal.ts';
import { requireAdmin } from './admin-guard.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { methodNotAllowed } from './method-not-allowed.ts';

export const API_KEYS_PATH = '/api/v1/api-keys';
const CANONICAL_ID = /^[1-9][0-9]{0,15}$/;
/** Integers that can name no key: answered 404 like any unknown id, not 400. */
const NON_POSITIVE_ID = /^(0|-[1-9][0-9]{0,15})$/;

/** Told once a change and its audit event are stored: for the log line. */
export interface KeyEvents {
  keyCreated(admin: AdminPrincipal, keyId: number, clientAddress: string): void;
  keyRevoked(admin: AdminPrincipal, keyId: number, clientAddress: string): void;
}

export interface ApiKeyRouteDeps {
  keys: KeyService;
  /** The admin guard: the one pipeline's decision. */
  guard: Pick<RequestPipeline, 'authorizeAdmin'>;
  knownScopes: ReadonlySet<string>;
  events: KeyEvents;
  now: () => Date;
}

/** POST, GET and DELETE of /api/v1/api-keys: admin token only, checked before the body is read. */
export function registerApiKeyRoutes(app: FastifyInstance, deps: ApiKeyRouteDeps): void {
  const { keys, guard, events, now } = deps;
  const createSchema = createKeyBodySchema(deps.knownScopes);
  const admins = new WeakMap<FastifyRequest, AdminPrincipal>();
  const authenticate = async (request: FastifyRequest) => {
    admins.set(request, await requireAdmin(request, guard));
  };
  const adminOf = (request: FastifyRequest) => admins.get(request)!;
  const actorOf = (request: FastifyRequest): Actor => ({ kind: 'admin', id: String(adminOf(request).adminId), address: request.ip });

  app.post(API_KEYS_PATH, { onRequest: authenticate }, async (request, reply) => {
    const input = parseCreateKeyRequest(createSchema, request.body, now());
    const { row, key } = await keys.createKey(input, actorOf(request));
    events.keyCreated(adminOf(request), row.id, request.ip);
    return reply
      .code(201)
      .header('location', `${API_KEYS_PATH}/${row.id}`)
      .header('cache-control', 'no-store')
      .send({ ...toRecord(row, now()), key });
  });

  app.get(API_KEYS_PATH, { onRequest: authenticate }, async (_request, reply) => {
    const at = now();
    const rows = await keys.listKeys();
    return reply.header('cache-control', 'no-store').send(rows.map((row) => toRecord(row, at)));
  });

  app.delete(`${API_KEYS_PATH}/:id`, { onRequest: authenticate }, async (request, reply) => {
    // The raw target, not the router's decoded parameter: `%31` must not quietly mean key 1.
    const id = request.url.slice(API_KEYS_PATH.length + 1).split('?')[0]!;
    if (NON_POSITIVE_ID.test(id)) throw new GatewayError('not_found', `No API key with id ${id}`);
    if (!CANONICAL_ID.test(id) || !Number.isSafeInteger(Number(id))) {
      throw new GatewayError('validation_failed', 'The key id must be a positive integer', {
        errors: [{ field: 'id', message: 'must be a positive integer' }],
      });
    }
    await keys.revokeKey(Number(id), actorOf(request));
    events.keyRevoked(adminOf(request), Number(id), request.ip);
    return reply.code(204).send();
  });

  methodNotAllowed(app, API_KEYS_PATH, ['GET', 'POST']);
  methodNotAllowed(app, `${API_KEYS_PATH}/:id`, ['DELETE']);
}
