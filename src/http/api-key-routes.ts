import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RequestPipeline } from '../pipeline/request-pipeline.ts';
import { createKeyBodySchema, parseCreateKeyRequest, parseUpdateKeyRequest, rotateKeyBodySchema, updateKeyBodySchema, validated } from '../keys/create-request.ts';
import { DEFAULT_GRACE_SECONDS, type Actor, type KeyService } from '../keys/key-service.ts';
import { toRecord } from '../keys/record.ts';
import type { AdminPrincipal } from '../policy/principal.ts';
import { requireAdmin } from './admin-guard.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { problemFor } from './problem.ts';
import { methodNotAllowed } from './method-not-allowed.ts';

export const API_KEYS_PATH = '/api/v1/api-keys';
const CANONICAL_ID = /^[1-9][0-9]{0,15}$/;
/** Integers that can name no key: answered 404 like any unknown id, not 400. */
const NON_POSITIVE_ID = /^(0|-[1-9][0-9]{0,15})$/;

/** Told once a change and its audit event are stored: for the log line. */
export interface KeyEvents {
  keyCreated(admin: AdminPrincipal, keyId: number, clientAddress: string): void;
  keyRevoked(admin: AdminPrincipal, keyId: number, clientAddress: string): void;
  keyUpdated(admin: AdminPrincipal, keyId: number, clientAddress: string): void;
  keyRotated(admin: AdminPrincipal, fromId: number, toId: number, clientAddress: string): void;
}


export interface ApiKeyRouteDeps {
  keys: KeyService;
  /** The admin guard: the one pipeline's decision. */
  guard: Pick<RequestPipeline, 'authorizeAdmin'>;
  knownScopes: ReadonlySet<string>;
  events: KeyEvents;
  now: () => Date;
}

/** POST, GET, PATCH and DELETE of /api/v1/api-keys and rotation: admin token only, checked before the body is read. */
export function registerApiKeyRoutes(app: FastifyInstance, deps: ApiKeyRouteDeps): void {
  const { keys, guard, events, now } = deps;
  const createSchema = createKeyBodySchema(deps.knownScopes);
  const updateSchema = updateKeyBodySchema(deps.knownScopes);
  // RFC 7396's media type, read as the JSON it is (with the same limits and prototype-poisoning
  // rules), for PATCH only: a parser is the instance's, and the other endpoints take application/json alone.
  const json = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/merge-patch+json', { parseAs: 'string' }, (request, body: string, done) => {
    if (request.method === 'PATCH') return json(request, body, done);
    done(new GatewayError('unsupported_media_type', 'application/merge-patch+json is taken by PATCH only: send application/json'), undefined);
  });
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

  app.get(`${API_KEYS_PATH}/:id`, { onRequest: authenticate }, async (request, reply) => {
    const row = await keys.getKey(keyIdOf(request));
    return reply.header('cache-control', 'no-store').send(toRecord(row, now()));
  });

  app.patch(`${API_KEYS_PATH}/:id`, { onRequest: authenticate }, async (request, reply) => {
    const id = keyIdOf(request);
    const patch = parseUpdateKeyRequest(updateSchema, request.body, now());
    const row = await keys.updateKey(id, patch, actorOf(request));
    events.keyUpdated(adminOf(request), id, request.ip);
    return reply.header('cache-control', 'no-store').send(toRecord(row, now()));
  });

  app.post(`${API_KEYS_PATH}/:id/rotate`, { onRequest: authenticate }, async (request, reply) => {
    const id = keyIdOf(request);
    // No body is no change to the defaults; a body is an object like any other (JSON `null` is not "none").
    const body = validated(rotateKeyBodySchema, request.body === undefined ? {} : request.body);
    const { row, key, unconfirmed } = await keys.rotateKey(id, body.grace_seconds ?? DEFAULT_GRACE_SECONDS, actorOf(request));
    events.keyRotated(adminOf(request), id, row.id, request.ip);
    reply.header('location', `${API_KEYS_PATH}/${row.id}`).header('cache-control', 'no-store');
    if (unconfirmed !== undefined) {
      // Stored, not confirmed on every replica: a 503 like any such change, carrying the new key,
      // which exists and would otherwise be lost (the old key cannot be rotated again).
      // Logged as every failed answer is (ids only: never the key).
      request.log.error({ err: unconfirmed, keyId: id, toKeyId: row.id }, 'request failed');
      const problem = problemFor(unconfirmed, request.id);
      return reply.code(problem.status).headers(problem.headers).send({ ...problem.body, id: row.id, key });
    }
    return reply.code(201).send({ ...toRecord(row, now()), key });
  });

  app.delete(`${API_KEYS_PATH}/:id`, { onRequest: authenticate }, async (request, reply) => {
    const id = keyIdOf(request);
    await keys.revokeKey(id, actorOf(request));
    events.keyRevoked(adminOf(request), id, request.ip);
    return reply.code(204).send();
  });

  methodNotAllowed(app, API_KEYS_PATH, ['GET', 'POST']);
  methodNotAllowed(app, `${API_KEYS_PATH}/:id`, ['GET', 'PATCH', 'DELETE']);
  methodNotAllowed(app, `${API_KEYS_PATH}/:id/rotate`, ['POST']);
}

/**
 * The key id of `/api/v1/api-keys/{id}[/…]`, from the raw target, not the router's decoded
 * parameter: `%31` must not quietly mean key 1. `0` or a negative integer names no key (404).
 */
function keyIdOf(request: FastifyRequest): number {
  const id = request.url.slice(API_KEYS_PATH.length + 1).split('?')[0]!.split('/')[0]!;
  if (NON_POSITIVE_ID.test(id)) throw new GatewayError('not_found', `No API key with id ${id}`);
  if (!CANONICAL_ID.test(id) || !Number.isSafeInteger(Number(id))) {
    throw new GatewayError('validation_failed', 'The key id must be a positive integer', {
      errors: [{ field: 'id', message: 'must be a positive integer' }],
    });
  }
  return Number(id);
}
