import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { auditEventSchema } from '../audit/record.ts';
import { createKeyBodySchema, rotateKeyBodySchema, updateKeyBodySchema } from '../keys/create-request.ts';
import { apiKeyRecordSchema, createdApiKeySchema } from '../keys/record.ts';
import { API_KEYS_PATH } from './api-key-routes.ts';
import { AUDIT_EVENTS_PATH, auditQuerySchema } from './audit-routes.ts';
import { LOGIN_PATH, loginBodySchema, loginResponseSchema } from './auth-routes.ts';
import { LOGOUT_PATH, PASSWORD_PATH, SESSION_ID, SESSIONS_PATH, passwordBodySchema, sessionSchema } from './session-routes.ts';
import { registerApiReference } from './api-reference.ts';
import { ERROR_CODES, type ErrorCode } from '../errors/gateway-error.ts';
import { methodNotAllowed } from './method-not-allowed.ts';

export const OPENAPI_PATH = '/api/v1/openapi.json';
export const DOCS_PATH = '/docs';

/** The problem+json body every refusal carries (RFC 9457; `problemFor` in errors.ts builds it). */
export const problemSchema = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
  instance: z.string().optional().meta({ description: 'The request id (also in `x-request-id`)' }),
  errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
});

export interface OpenApiOptions {
  /** Every scope a key may be granted: listed in the create body's schema. */
  knownScopes: ReadonlySet<string>;
  version: string;
  /** Serve `GET /api/v1/openapi.json` (`OPENAPI_ENABLED`). */
  openapi: boolean;
  /** Serve the reference page at `/docs` (`DOCS_ENABLED`); it renders the document, so only with `openapi`. */
  docs: boolean;
}

type JsonSchema = Record<string, unknown>;
export type OpenApiDocument = JsonSchema & { openapi: string; paths: Record<string, Record<string, JsonSchema>> };

/**
 * The OpenAPI 3.1 document of the gateway's own endpoints, generated from the zod schemas
 * the handlers validate with (and the response schemas their answers are built to), so the
 * description cannot drift from the code. Built once: its only input is the config.
 */
export function buildOpenApiDocument(knownScopes: ReadonlySet<string>, version: string): OpenApiDocument {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Gatehouse',
      version,
      description:
        'The gateway\'s own endpoints: admin login and sessions, API-key management and the audit trail. ' +
        'Everything else is authorized and proxied to the agent platform. Every refusal is ' +
        '`application/problem+json` with a stable `code`.',
    },
    tags: [
      { name: 'auth', description: 'Admin login, sessions and password' },
      { name: 'api-keys', description: 'API keys (admin token only)' },
      { name: 'audit', description: 'The audit trail (admin token only)' },
      { name: 'meta', description: 'This document' },
    ],
    paths: {
      [LOGIN_PATH]: { post: loginOperation() },
      ...sessionOperations(),
      [API_KEYS_PATH]: { post: createApiKeyOperation(), get: listApiKeysOperation() },
      [`${API_KEYS_PATH}/{id}`]: { get: getApiKeyOperation(), patch: updateApiKeyOperation(), delete: revokeApiKeyOperation() },
      [`${API_KEYS_PATH}/{id}/rotate`]: { post: rotateApiKeyOperation() },
      [AUDIT_EVENTS_PATH]: { get: listAuditEventsOperation() },
      [OPENAPI_PATH]: { get: openApiDocumentOperation() },
    },
    components: {
      securitySchemes: {
        adminToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'The token from `POST /api/v1/auth/login`' },
      },
      schemas: {
        LoginRequest: jsonSchema(loginBodySchema, 'input'),
        LoginResponse: jsonSchema(loginResponseSchema, 'output'),
        AdminSession: jsonSchema(sessionSchema, 'output'),
        ChangePasswordRequest: jsonSchema(passwordBodySchema, 'input'),
        CreateApiKeyRequest: jsonSchema(createKeyBodySchema(knownScopes), 'input'),
        // The schema's refinement (at least one field) has no JSON Schema of its own.
        UpdateApiKeyRequest: { ...jsonSchema(updateKeyBodySchema(knownScopes), 'input'), minProperties: 1 },
        RotateApiKeyRequest: jsonSchema(rotateKeyBodySchema, 'input'),
        ApiKeyRecord: jsonSchema(apiKeyRecordSchema, 'output'),
        CreatedApiKey: jsonSchema(createdApiKeySchema, 'output'),
        AuditEvent: jsonSchema(auditEventSchema, 'output'),
        Problem: jsonSchema(problemSchema, 'output'),
      },
    },
  };
}

/** Serves the document (public, no credential) and the reference page, each when enabled. */
export async function registerOpenApi(app: FastifyInstance, options: OpenApiOptions): Promise<void> {
  if (!options.openapi) return;
  const document = JSON.stringify(buildOpenApiDocument(options.knownScopes, options.version));
  app.get(OPENAPI_PATH, async (_request, reply) => reply.type('application/json; charset=utf-8').send(document));
  methodNotAllowed(app, OPENAPI_PATH, ['GET']);
  if (options.docs) registerApiReference(app, { path: DOCS_PATH, documentUrl: OPENAPI_PATH });
}

/** Every refusal of an endpoint that takes an admin token and nothing else (`revoked_credential`: its session was ended). */
const ADMIN_REFUSALS = ['missing_credential', 'invalid_credential', 'expired_credential', 'revoked_credential', 'wrong_credential_type'] as const;
/** The security requirement of an endpoint that takes an admin token and nothing else. */
const ADMIN_TOKEN = [{ adminToken: [] }];

function loginOperation(): JsonSchema {
  return {
    operationId: 'login',
    tags: ['auth'],
    summary: 'Log in as an admin',
    description: 'A wrong email and a wrong password get the same 401. After 10 failures for one email or from one address within 15 minutes, logins are answered 429 until the window closes.',
    security: [],
    requestBody: { required: true, content: json(ref('LoginRequest')) },
    responses: {
      '200': { description: 'An admin session token', headers: noStore(), content: json(ref('LoginResponse')) },
      ...problems('validation_failed', 'bad_request', 'invalid_credential', 'payload_too_large', 'unsupported_media_type', 'rate_limited', 'store_unavailable'),
    },
  };
}

/**
 * The caller's own sessions and password (docs/api-keys.md, "Admin sessions"). Each end of a
 * session answers once every replica refuses its token, or `503` when Redis cannot confirm it.
 */
function sessionOperations(): Record<string, Record<string, JsonSchema>> {
  const own = { tags: ['auth'], security: ADMIN_TOKEN };
  const everywhere = 'is refused (401 `revoked_credential`) on every replica before the answer leaves.';
  const unconfirmed =
    ' With Redis away, an end stored but not confirmed on every replica is 503 `store_unavailable`: it stands, and the other replicas refuse the token within `KEY_CACHE_TTL`.';
  const ended = { description: 'Ended' };
  return {
    [LOGOUT_PATH]: {
      post: { ...own, operationId: 'logout', summary: 'Log out', description: `The token presented ${everywhere}${unconfirmed}`, responses: { '204': ended, ...problems(...ADMIN_REFUSALS, 'store_unavailable') } },
    },
    [SESSIONS_PATH]: {
      get: {
        ...own,
        operationId: 'listSessions',
        summary: 'List your sessions',
        description: 'The sessions of the admin whose token asks that are neither expired nor ended, oldest first; `current` marks the one of the token presented.',
        responses: { '200': { description: 'The sessions', headers: noStore(), content: json({ type: 'array', items: ref('AdminSession') }) }, ...problems(...ADMIN_REFUSALS, 'store_unavailable') },
      },
    },
    [`${SESSIONS_PATH}/{id}`]: {
      delete: {
        ...own,
        operationId: 'endSession',
        summary: 'End one of your sessions',
        description: `Its token ${everywhere} One of yours ended already is 204 again (announced again). Another admin's session, an expired one, or an id that names none is 404.${unconfirmed}`,
        parameters: [{ name: 'id', in: 'path', required: true, description: 'A session id as listed (the token\'s `jti`); anything else is 404', schema: { type: 'string', pattern: SESSION_ID.source } }],
        responses: { '204': ended, ...problems(...ADMIN_REFUSALS, 'not_found', 'store_unavailable') },
      },
    },
    [PASSWORD_PATH]: {
      post: {
        ...own,
        operationId: 'changePassword',
        summary: 'Change your password',
        description:
          'A wrong `current_password` is 401 `invalid_credential` and counts as a failed login: after 10 failures for the admin\'s email or from one address within 15 minutes, ' +
          `password changes and logins are 429. Every other session of the admin ${everywhere} The session that made the change keeps working.${unconfirmed}`,
        requestBody: { required: true, content: json(ref('ChangePasswordRequest')) },
        responses: {
          '204': { description: 'Changed; the admin\'s other sessions are ended' },
          ...problems('validation_failed', 'bad_request', ...ADMIN_REFUSALS, 'payload_too_large', 'unsupported_media_type', 'rate_limited', 'store_unavailable'),
        },
      },
    },
  };
}

function createApiKeyOperation(): JsonSchema {
  return {
    operationId: 'createApiKey',
    tags: ['api-keys'],
    summary: 'Create an API key',
    description:
      'The raw key is in this response only. Creating a key over `LICENSE_API_KEYS` is 402 and creates nothing. ' +
      'Without `rate_limit` the key gets `DEFAULT_KEY_RATE_LIMIT` (none when it is unset); `rate_limit: null` means none. ' +
      'Past its limit a key\'s requests on the proxied paths are 429 `rate_limited` with `Retry-After`, and every answer to them ' +
      'carries `RateLimit-Policy` and `RateLimit`.',
    security: ADMIN_TOKEN,
    requestBody: { required: true, content: json(ref('CreateApiKeyRequest')) },
    responses: {
      '201': {
        description: 'The created key: its record and the raw key',
        headers: { location: { description: '/api/v1/api-keys/{id}', schema: { type: 'string' } }, ...noStore() },
        content: json(ref('CreatedApiKey')),
      },
      ...problems('validation_failed', 'bad_request', ...ADMIN_REFUSALS, 'license_limit', 'payload_too_large', 'unsupported_media_type', 'store_unavailable'),
    },
  };
}

function listApiKeysOperation(): JsonSchema {
  return {
    operationId: 'listApiKeys',
    tags: ['api-keys'],
    summary: 'List API keys',
    description: 'Every key, revoked and expired ones included (`is_active: false`), by id; never the raw key.',
    security: ADMIN_TOKEN,
    responses: {
      '200': { description: 'The records', headers: noStore(), content: json({ type: 'array', items: ref('ApiKeyRecord') }) },
      ...problems(...ADMIN_REFUSALS, 'store_unavailable'),
    },
  };
}

/** The key id of `/api/v1/api-keys/{id}[/…]`, read from the raw target as every one of its operations reads it. */
const ID_PARAMETER: JsonSchema = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'A canonical decimal integer; `0` or a negative one is 404, anything else that is not one is 400',
  schema: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
};

function getApiKeyOperation(): JsonSchema {
  return {
    operationId: 'getApiKey',
    tags: ['api-keys'],
    summary: 'Read an API key',
    description: 'The record, whatever its status; never the raw key.',
    security: ADMIN_TOKEN,
    parameters: [ID_PARAMETER],
    responses: {
      '200': { description: 'The record', headers: noStore(), content: json(ref('ApiKeyRecord')) },
      ...problems('validation_failed', ...ADMIN_REFUSALS, 'not_found', 'store_unavailable'),
    },
  };
}

function updateApiKeyOperation(): JsonSchema {
  return {
    operationId: 'updateApiKey',
    tags: ['api-keys'],
    summary: 'Change an API key',
    description:
      'A JSON merge patch (RFC 7396): the fields sent are changed, each validated as on create; `null` clears `agent_id`, ' +
      '`expires_at` and `rate_limit`. `enabled: false` disables the key (401 `disabled_credential` until enabled again). ' +
      'The change is in force on every replica before the answer leaves. A revoked key is 409 `key_revoked`; a rotated key\'s ' +
      '`expires_at` can only be brought forward (409 `key_rotated`); enabling a key, or giving an expired key a new expiry, ' +
      'while the other keys reach `LICENSE_API_KEYS` is 402. A patch that changes nothing changes nothing and answers the record.',
    security: ADMIN_TOKEN,
    parameters: [ID_PARAMETER],
    requestBody: { required: true, content: { ...json(ref('UpdateApiKeyRequest')), 'application/merge-patch+json': { schema: ref('UpdateApiKeyRequest') } } },
    responses: {
      '200': { description: 'The updated record', headers: noStore(), content: json(ref('ApiKeyRecord')) },
      ...problems(
        'validation_failed',
        'bad_request',
        ...ADMIN_REFUSALS,
        'license_limit',
        'not_found',
        'key_revoked',
        'key_rotated',
        'payload_too_large',
        'unsupported_media_type',
        'store_unavailable',
      ),
    },
  };
}

function rotateApiKeyOperation(): JsonSchema {
  return {
    operationId: 'rotateApiKey',
    tags: ['api-keys'],
    summary: 'Rotate an API key',
    description:
      'A new key with the old one\'s name, agent, scopes, expiry, `enabled` and rate limit, and `rotated_from`; the raw key ' +
      'is in this response only. The old key gets `rotated_to` and keeps working for `grace_seconds` (default 86400; `0` ' +
      'revokes it before the answer). A predecessor of the old key still in its grace period is revoked: at most two keys ' +
      'of a chain accept requests. A key in its grace period counts towards no licence, so a rotation is never 402. ' +
      'The body may be left out. A rotation stored but not confirmed on every replica (Redis away) is 503, whose problem ' +
      'body also carries the new key\'s `id` and `key`.',
    security: ADMIN_TOKEN,
    parameters: [ID_PARAMETER],
    requestBody: { required: false, content: json(ref('RotateApiKeyRequest')) },
    responses: {
      '201': {
        description: 'The new key: its record and the raw key',
        headers: { location: { description: '/api/v1/api-keys/{id} of the new key', schema: { type: 'string' } }, ...noStore() },
        content: json(ref('CreatedApiKey')),
      },
      ...problems(
        'validation_failed',
        'bad_request',
        ...ADMIN_REFUSALS,
        'not_found',
        'key_revoked',
        'key_expired',
        'key_rotated',
        'payload_too_large',
        'unsupported_media_type',
        'store_unavailable',
      ),
    },
  };
}

function revokeApiKeyOperation(): JsonSchema {
  return {
    operationId: 'revokeApiKey',
    tags: ['api-keys'],
    summary: 'Revoke an API key',
    description: 'At once: the key\'s next use is 401 `revoked_credential`. Revoking a revoked key is 204 again.',
    security: ADMIN_TOKEN,
    parameters: [ID_PARAMETER],
    responses: {
      '204': { description: 'Revoked' },
      ...problems('validation_failed', ...ADMIN_REFUSALS, 'not_found', 'store_unavailable'),
    },
  };
}

function listAuditEventsOperation(): JsonSchema {
  return {
    operationId: 'listAuditEvents',
    tags: ['audit'],
    summary: 'List audit events',
    description:
      'Logins (success and failure), logouts, ended sessions, password changes and resets, and key creations, changes, rotations ' +
      'and revocations, by the API or the `gatehouse` CLI; newest first.',
    security: ADMIN_TOKEN,
    parameters: queryParameters(auditQuerySchema),
    responses: {
      '200': { description: 'The events, newest first', headers: noStore(), content: json({ type: 'array', items: ref('AuditEvent') }) },
      ...problems('validation_failed', ...ADMIN_REFUSALS, 'store_unavailable'),
    },
  };
}

function openApiDocumentOperation(): JsonSchema {
  return {
    operationId: 'getOpenApiDocument',
    tags: ['meta'],
    summary: 'This OpenAPI document',
    security: [],
    responses: { '200': { description: 'OpenAPI 3.1', content: json({ type: 'object' }) } },
  };
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  // OpenAPI 3.1's dialect is JSON Schema 2020-12; the document, not each schema, says so.
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, target: 'draft-2020-12' }) as JsonSchema;
  return rest;
}

/** One OpenAPI parameter per field of a strict query schema, typed as the handler reads it. */
function queryParameters(schema: z.ZodObject): JsonSchema[] {
  return Object.entries(schema.shape).map(([name, field]) => {
    const { description, ...parameterSchema } = jsonSchema(field as z.ZodType, 'output');
    return { name, in: 'query', required: !(field as z.ZodType).safeParse(undefined).success, description, schema: parameterSchema };
  });
}

function ref(name: string): JsonSchema {
  return { $ref: `#/components/schemas/${name}` };
}

function json(schema: JsonSchema): JsonSchema {
  return { 'application/json': { schema } };
}

function noStore(): JsonSchema {
  return { 'cache-control': { schema: { type: 'string', const: 'no-store' } } };
}

/** The problem+json responses of the given codes, grouped by status. */
function problems(...codes: ErrorCode[]): Record<string, JsonSchema> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) byStatus.set(ERROR_CODES[code].status, [...(byStatus.get(ERROR_CODES[code].status) ?? []), code]);
  const responses: Record<string, JsonSchema> = {};
  for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
    const headers: JsonSchema = {};
    if (status === 401 || status === 403) headers['www-authenticate'] = { schema: { type: 'string' } };
    if (status === 429) headers['retry-after'] = { description: 'Seconds', schema: { type: 'integer' } };
    if (status === 405) headers.allow = { schema: { type: 'string' } };
    responses[String(status)] = {
      description: group.map((code) => `\`${code}\``).join(', '),
      ...(Object.keys(headers).length ? { headers } : {}),
      content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
    };
  }
  return responses;
}
