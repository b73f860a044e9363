import { z } from 'zod';
import type { ApiKeyRow } from '../store/store.ts';

export const KEY_STATUSES = ['active', 'disabled', 'expired', 'revoked'] as const;
export type KeyStatus = (typeof KEY_STATUSES)[number];

/**
 * The API key record, plus `status` and `created_at` (docs/api-keys.md). Never
 * `key`. The schema is the OpenAPI description of every record the API answers with.
 */
export const apiKeyRecordSchema = z.strictObject({
  id: z.number().int().positive(),
  name: z.string(),
  agent_id: z.number().int().positive().nullable(),
  key_prefix: z.string(),
  scopes: z.array(z.string()),
  is_active: z.boolean(),
  status: z.enum(KEY_STATUSES),
  created_at: z.iso.datetime(),
  last_used_at: z.iso.datetime().nullable(),
  expires_at: z.iso.datetime().nullable(),
  enabled: z.boolean(),
  updated_at: z.iso.datetime(),
  rate_limit: z.strictObject({ requests: z.number().int().positive(), per_seconds: z.number().int().positive() }).nullable(),
  rotated_from: z.number().int().positive().nullable().meta({ description: 'The key this one replaced by rotation' }),
  rotated_to: z.number().int().positive().nullable().meta({ description: 'The key that replaced this one; it works until `expires_at` (its grace period)' }),
});
export type ApiKeyRecord = z.output<typeof apiKeyRecordSchema>;

/** What creation answers: the record and the raw key, shown this once. */
export const createdApiKeySchema = apiKeyRecordSchema.extend({
  key: z.string().meta({ description: 'The raw API key; shown only in this response' }),
});

export function keyStatus(row: Pick<ApiKeyRow, 'revokedAt' | 'expiresAt' | 'enabled'>, now: Date): KeyStatus {
  if (row.revokedAt) return 'revoked';
  if (row.expiresAt && row.expiresAt.getTime() <= now.getTime()) return 'expired';
  return row.enabled ? 'active' : 'disabled';
}

export function toRecord(row: ApiKeyRow, now: Date): ApiKeyRecord {
  const status = keyStatus(row, now);
  return {
    id: row.id,
    name: row.name,
    agent_id: row.agentId,
    key_prefix: row.keyPrefix,
    scopes: row.scopes,
    is_active: status === 'active',
    status,
    created_at: row.createdAt.toISOString(),
    last_used_at: row.lastUsedAt?.toISOString() ?? null,
    expires_at: row.expiresAt?.toISOString() ?? null,
    enabled: row.enabled,
    updated_at: row.updatedAt.toISOString(),
    rate_limit: row.rateLimit === null ? null : { requests: row.rateLimit.requests, per_seconds: row.rateLimit.perSeconds },
    rotated_from: row.rotatedFrom,
    rotated_to: row.rotatedTo,
  };
}
