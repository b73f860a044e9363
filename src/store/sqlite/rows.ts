import type { AdminRow, ApiKeyRow, AuditEventRow } from '../store.ts';

/** Rows as SQLite returns them: timestamps in ms since the epoch, scopes and detail as JSON text. */
export interface AdminRecord {
  id: number;
  email: string;
  password_hash: string;
  created_at: number;
}

export interface ApiKeyRecord {
  id: number;
  name: string;
  agent_id: number | null;
  key_prefix: string;
  key_hash: string;
  scopes: string;
  created_at: number;
  last_used_at: number | null;
  expires_at: number | null;
  revoked_at: number | null;
  enabled: number;
  updated_at: number;
  rate_limit_requests: number | null;
  rate_limit_per_seconds: number | null;
  rotated_from: number | null;
  rotated_to: number | null;
}

export interface AuditEventRecord {
  id: number;
  at: number;
  action: string;
  actor_kind: string | null;
  actor_id: string | null;
  subject_id: string | null;
  client_address: string | null;
  detail: string;
}

/** A Date as stored. An invalid Date would bind as NULL: refused instead. */
export function millis(at: Date): number {
  const time = at.getTime();
  if (!Number.isFinite(time)) throw new RangeError('an invalid Date cannot be stored');
  return time;
}

export function millisOrNull(at: Date | null): number | null {
  return at === null ? null : millis(at);
}

function dateOrNull(time: number | null): Date | null {
  return time === null ? null : new Date(time);
}

export function toAdmin(row: AdminRecord): AdminRow {
  return { id: row.id, email: row.email, passwordHash: row.password_hash, createdAt: new Date(row.created_at) };
}

export function toApiKey(row: ApiKeyRecord): ApiKeyRow {
  return {
    id: row.id,
    name: row.name,
    agentId: row.agent_id,
    keyPrefix: row.key_prefix,
    keyHash: row.key_hash,
    scopes: JSON.parse(row.scopes) as string[],
    createdAt: new Date(row.created_at),
    lastUsedAt: dateOrNull(row.last_used_at),
    expiresAt: dateOrNull(row.expires_at),
    revokedAt: dateOrNull(row.revoked_at),
    enabled: row.enabled === 1,
    updatedAt: new Date(row.updated_at),
    rateLimit: row.rate_limit_requests === null || row.rate_limit_per_seconds === null ? null : { requests: row.rate_limit_requests, perSeconds: row.rate_limit_per_seconds },
    rotatedFrom: row.rotated_from,
    rotatedTo: row.rotated_to,
  };
}

export function toAuditEvent(row: AuditEventRecord): AuditEventRow {
  return {
    id: row.id,
    at: new Date(row.at),
    action: row.action,
    actorKind: row.actor_kind,
    actorId: row.actor_id,
    subjectId: row.subject_id,
    clientAddress: row.client_address,
    detail: JSON.parse(row.detail) as Record<string, unknown>,
  };
}

/** An API key's columns as bound to `$name` parameters. */
/** A key's columns that creation, import and rotation write, as bound to `$name` parameters. */
export function apiKeyParameters(key: Pick<ApiKeyRow, 'name' | 'agentId' | 'keyPrefix' | 'keyHash' | 'scopes' | 'expiresAt'> & Partial<Pick<ApiKeyRow, 'enabled' | 'rateLimit' | 'rotatedFrom' | 'rotatedTo'>>) {
  return {
    name: key.name,
    agent_id: key.agentId,
    key_prefix: key.keyPrefix,
    key_hash: key.keyHash,
    scopes: JSON.stringify(key.scopes),
    expires_at: millisOrNull(key.expiresAt),
    enabled: key.enabled === false ? 0 : 1,
    rate_limit_requests: key.rateLimit?.requests ?? null,
    rate_limit_per_seconds: key.rateLimit?.perSeconds ?? null,
    rotated_from: key.rotatedFrom ?? null,
    rotated_to: key.rotatedTo ?? null,
  };
}

/** An audit event's columns as bound to `$name` parameters. */
export function auditParameters(event: Omit<AuditEventRow, 'id' | 'at'> & { at: Date }) {
  return {
    at: millis(event.at),
    action: event.action,
    actor_kind: event.actorKind,
    actor_id: event.actorId,
    subject_id: event.subjectId,
    client_address: event.clientAddress,
    detail: JSON.stringify(event.detail ?? {}),
  };
}
