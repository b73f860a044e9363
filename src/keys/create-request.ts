import { z } from 'zod';
import { RATE_LIMIT_BOUNDS } from '../config/rate-limit.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { storableString } from '../store/storable-text.ts';
import type { ApiKeyPatch, RateLimit } from '../store/store.ts';

export const DEFAULT_SCOPES = ['events:write'] as const;
export const NAME_MAX_LENGTH = 200;

export interface CreateKeyRequest {
  name: string;
  agentId: number | null;
  scopes: string[];
  expiresAt: Date | null;
  /** undefined: none named, the deployment's default applies (`DEFAULT_KEY_RATE_LIMIT`); null: none. */
  rateLimit?: RateLimit | null;
}

/** A key's rate limit as the API spells it (docs/api-keys.md). */
export const rateLimitSchema = z.strictObject({
  requests: z.number().int('must be an integer').min(RATE_LIMIT_BOUNDS.requests.min).max(RATE_LIMIT_BOUNDS.requests.max),
  per_seconds: z.number().int('must be an integer').min(RATE_LIMIT_BOUNDS.perSeconds.min).max(RATE_LIMIT_BOUNDS.perSeconds.max),
});

/** The fields of the create body, each validated the same way on update. */
function keyFields(knownScopes: ReadonlySet<string>) {
  return {
    name: storableString().trim().min(1, 'must not be empty').max(NAME_MAX_LENGTH, `must be at most ${NAME_MAX_LENGTH} characters`),
    agent_id: z.number().int('must be an integer').positive('must be a positive integer').max(Number.MAX_SAFE_INTEGER).nullable().optional(),
    scopes: z
      .array(
        storableString()
          .refine((scope) => knownScopes.has(scope), {
            error: (issue) =>
              String(issue.input).includes('*')
                ? 'wildcard scopes do not exist: name each scope'
                : `unknown scope (known: ${[...knownScopes].sort().join(', ')})`,
          })
          // The same set, for the OpenAPI description (a refinement has no JSON Schema of its own).
          .meta({ enum: [...knownScopes].sort() }),
      )
      .min(1, 'must hold at least one scope')
      .max(64)
      .optional(),
    expires_at: z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time with a time zone' }).nullable().optional(),
    rate_limit: rateLimitSchema
      .nullable()
      .optional()
      .meta({ description: 'At most `requests` over any interval of `per_seconds`; null: none. On create, omitted: DEFAULT_KEY_RATE_LIMIT' }),
  };
}

/** The create body's schema; also the source of its OpenAPI description. */
export function createKeyBodySchema(knownScopes: ReadonlySet<string>) {
  return z.strictObject(keyFields(knownScopes));
}

/**
 * The update body (`PATCH`, JSON merge patch, RFC 7396): any of the create's fields, and
 * `enabled` and `rate_limit`; `null` clears `agent_id`, `expires_at` and `rate_limit`.
 */
export function updateKeyBodySchema(knownScopes: ReadonlySet<string>) {
  const { name, agent_id, scopes, expires_at, rate_limit } = keyFields(knownScopes);
  return z
    .strictObject({ name: name.optional(), agent_id, scopes, expires_at, enabled: z.boolean().optional(), rate_limit })
    .refine((body) => Object.keys(body).length > 0, { error: 'must change at least one field' });
}

/** Validates an update body into a patch: the same rules as a create, fields left out left alone. */
export function parseUpdateKeyRequest(schema: ReturnType<typeof updateKeyBodySchema>, body: unknown, now: Date): ApiKeyPatch {
  const data = validated(schema, body);
  const expiresAt = data.expires_at === undefined ? undefined : data.expires_at === null ? null : futureDate(data.expires_at, now);
  return {
    ...(data.name === undefined ? {} : { name: data.name }),
    ...(data.scopes === undefined ? {} : { scopes: [...new Set(data.scopes)] }),
    ...(data.agent_id === undefined ? {} : { agentId: data.agent_id }),
    ...(expiresAt === undefined ? {} : { expiresAt }),
    ...(data.enabled === undefined ? {} : { enabled: data.enabled }),
    ...(data.rate_limit === undefined ? {} : { rateLimit: rateLimitOf(data.rate_limit) }),
  };
}

function rateLimitOf(limit: { requests: number; per_seconds: number } | null): RateLimit | null {
  return limit === null ? null : { requests: limit.requests, perSeconds: limit.per_seconds };
}

/** Validates a create body; every problem becomes one entry of a 400 `validation_failed`. */
export function parseCreateKeyRequest(
  schema: ReturnType<typeof createKeyBodySchema>,
  body: unknown,
  now: Date,
): CreateKeyRequest {
  const { name, agent_id, scopes, expires_at, rate_limit } = validated(schema, body);
  const expiresAt = expires_at ? futureDate(expires_at, now) : null;
  return {
    name,
    agentId: agent_id ?? null,
    scopes: scopes ? [...new Set(scopes)] : [...DEFAULT_SCOPES],
    expiresAt,
    ...(rate_limit === undefined ? {} : { rateLimit: rateLimitOf(rate_limit) }),
  };
}

/** The body as the schema reads it; every problem becomes one entry of a 400 `validation_failed` (also the rotate body's). */
export function validated<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const errors = parsed.error.issues.map((issue) => ({
    field: issue.path.length ? issue.path.join('.') : issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : 'body',
    message: issue.code === 'unrecognized_keys' ? 'unknown field' : issue.message,
  }));
  throw new GatewayError('validation_failed', describe(errors), { errors });
}

function futureDate(text: string, now: Date): Date {
  const at = new Date(text);
  if (at.getTime() > now.getTime()) return at;
  const errors = [{ field: 'expires_at', message: 'must be in the future' }];
  throw new GatewayError('validation_failed', describe(errors), { errors });
}

function describe(errors: ReadonlyArray<{ field: string; message: string }>): string {
  return errors.map((error) => `${error.field}: ${error.message}`).join('; ');
}

/** The rotate body: optional, and so is its one field. */
export const rotateKeyBodySchema = z.strictObject({
  grace_seconds: z.number().int('must be an integer').min(0).max(2_592_000).optional().meta({ description: 'How long the old key keeps working; 0 revokes it at once. Default 86400' }),
});
