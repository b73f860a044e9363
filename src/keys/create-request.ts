import { z } from 'zod';
import { GatewayError } from '../errors/gateway-error.ts';

export const DEFAULT_SCOPES = ['events:write'] as const;
export const NAME_MAX_LENGTH = 200;

export interface CreateKeyRequest {
  name: string;
  agentId: number | null;
  scopes: string[];
  expiresAt: Date | null;
}

/** The create body's schema; also the source of its OpenAPI description. */
export function createKeyBodySchema(knownScopes: ReadonlySet<string>) {
  return z.strictObject({
    name: z.string().trim().min(1, 'must not be empty').max(NAME_MAX_LENGTH, `must be at most ${NAME_MAX_LENGTH} characters`),
    agent_id: z.number().int('must be an integer').positive('must be a positive integer').max(Number.MAX_SAFE_INTEGER).nullable().optional(),
    scopes: z
      .array(
        z
          .string()
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
  });
}

/** Validates a create body; every problem becomes one entry of a 400 `validation_failed`. */
export function parseCreateKeyRequest(
  schema: ReturnType<typeof createKeyBodySchema>,
  body: unknown,
  now: Date,
): CreateKeyRequest {
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const errors = parsed.error.issues.map((issue) => ({
      field: issue.path.length ? issue.path.join('.') : issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : 'body',
      message: issue.code === 'unrecognized_keys' ? 'unknown field' : issue.message,
    }));
    throw new GatewayError('validation_failed', describe(errors), { errors });
  }
  const { name, agent_id, scopes, expires_at } = parsed.data;
  const expiresAt = expires_at ? new Date(expires_at) : null;
  if (expiresAt && expiresAt.getTime() <= now.getTime()) {
    const errors = [{ field: 'expires_at', message: 'must be in the future' }];
    throw new GatewayError('validation_failed', describe(errors), { errors });
  }
  return {
    name,
    agentId: agent_id ?? null,
    scopes: scopes ? [...new Set(scopes)] : [...DEFAULT_SCOPES],
    expiresAt,
  };
}

function describe(errors: ReadonlyArray<{ field: string; message: string }>): string {
  return errors.map((error) => `${error.field}: ${error.message}`).join('; ');
}
