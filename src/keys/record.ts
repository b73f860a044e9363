import type { ApiKeyRow } from '../store/store.ts';

export type KeyStatus = 'active' | 'expired' | 'revoked';

/** The API key record of the spec (§2), plus `status` and `created_at` (interface.md). Never `key`. */
export interface ApiKeyRecord {
  id: number;
  name: string;
  agent_id: number | null;
  key_prefix: string;
  scopes: string[];
  is_active: boolean;
  status: KeyStatus;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
}

export function keyStatus(row: Pick<ApiKeyRow, 'revokedAt' | 'expiresAt'>, now: Date): KeyStatus {
  if (row.revokedAt) return 'revoked';
  if (row.expiresAt && row.expiresAt.getTime() <= now.getTime()) return 'expired';
  return 'active';
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
  };
}
