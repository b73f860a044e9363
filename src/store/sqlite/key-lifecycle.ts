import { isLive, patched, rotation, stillInGrace } from '../key-lifecycle.ts';
import type { ApiKeyPatch, ApiKeyRow, AuditOfUpdate, NewAuditEvent, RotateKeyResult, UpdateKeyResult } from '../store.ts';
import { apiKeyParameters, millis, millisOrNull, toApiKey, type ApiKeyRecord } from './rows.ts';

/**
 * The key lifecycle's writes on SQLite (`Store.updateApiKey`, `Store.rotateApiKey`), run inside
 * the store's write transaction (BEGIN IMMEDIATE: one writer at a time, so the row read is the
 * row written). The rules are ../key-lifecycle.ts's.
 */
export interface SqliteSession {
  get<R>(sql: string, parameters?: Record<string, string | number | null>): R | undefined;
  all<R>(sql: string, parameters?: Record<string, string | number | null>): R[];
  appendAudit(event: NewAuditEvent): void;
}

/** The counted keys, as the create's licence check counts them (../key-lifecycle.ts, `countsTowardsLicence`). */
export const COUNTED_KEYS = `revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $now)
  AND (rotated_to IS NULL OR NOT EXISTS (
    SELECT 1 FROM api_keys AS successor
    WHERE successor.id = api_keys.rotated_to AND successor.revoked_at IS NULL AND (successor.expires_at IS NULL OR successor.expires_at > $now)))`;

export function updateApiKey(
  session: SqliteSession,
  id: number,
  patch: ApiKeyPatch,
  options: { now: Date; limit: number | null; audit?: AuditOfUpdate },
): UpdateKeyResult {
  const before = keyOf(session, id);
  if (before === null) return { ok: false, reason: 'not_found' };
  const successor = before.rotatedTo === null ? null : keyOf(session, before.rotatedTo);
  const next = patched(before, patch, options.now, successor !== null && isLive(successor, options.now));
  if ('refused' in next) return { ok: false, reason: next.refused };
  if (next.checksLicence && options.limit !== null) {
    const counted = session.get<{ count: number }>(`SELECT count(*) AS count FROM api_keys WHERE ${COUNTED_KEYS} AND id <> $id`, { now: millis(options.now), id });
    if (Number(counted?.count ?? 0) >= options.limit) return { ok: false, reason: 'license_limit' };
  }
  if (next.changed.length === 0) return { ok: true, key: before, before };
  const key = writeKey(session, next.after);
  for (const event of options.audit?.(before, key) ?? []) session.appendAudit(event);
  return { ok: true, key, before };
}

export function rotateApiKey(
  session: SqliteSession,
  id: number,
  next: { keyPrefix: string; keyHash: string },
  options: { now: Date; graceMs: number; audit?: (old: ApiKeyRow, next: ApiKeyRow, revoked: readonly number[]) => NewAuditEvent },
): RotateKeyResult {
  const { now } = options;
  const old = keyOf(session, id);
  if (old === null) return { ok: false, reason: 'not_found' };
  const change = rotation(old, now, options.graceMs);
  if ('refused' in change) return { ok: false, reason: change.refused };
  const inserted = session.get<ApiKeyRecord>(
    `INSERT INTO api_keys (name, agent_id, key_prefix, key_hash, scopes, created_at, updated_at, expires_at, enabled,
       rate_limit_requests, rate_limit_per_seconds, rotated_from, rotated_to)
     VALUES ($name, $agent_id, $key_prefix, $key_hash, $scopes, $now, $now, $expires_at, $enabled,
       $rate_limit_requests, $rate_limit_per_seconds, $rotated_from, $rotated_to)
     ON CONFLICT (key_prefix) DO NOTHING RETURNING *`,
    { ...apiKeyParameters({ ...old, ...next, rotatedFrom: old.id, rotatedTo: null }), now: millis(now) },
  );
  if (!inserted) return { ok: false, reason: 'prefix_taken' };
  const key = toApiKey(inserted);
  const replaced = writeKey(session, { ...old, expiresAt: change.expiresAt, revokedAt: change.revokedAt, rotatedTo: key.id, updatedAt: now });
  const revoked = change.revokedAt === null ? [] : [old.id];
  // At most two live keys in a chain: a predecessor still in its grace period ends now.
  const predecessor = old.rotatedFrom === null ? null : keyOf(session, old.rotatedFrom);
  if (stillInGrace(predecessor, old, now)) {
    writeKey(session, { ...predecessor, revokedAt: now, updatedAt: now });
    revoked.push(predecessor.id);
  }
  if (options.audit) session.appendAudit(options.audit(replaced, key, revoked));
  return { ok: true, key, old: replaced, revoked };
}

export function countKeysByStatus(session: SqliteSession, now: Date): { active: number; disabled: number; expired: number; revoked: number } {
  const row = session.get<{ active: number | null; disabled: number | null; expired: number | null; revoked: number | null }>(
    `SELECT
       count(*) FILTER (WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $now) AND enabled = 1) AS active,
       count(*) FILTER (WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $now) AND enabled = 0) AS disabled,
       count(*) FILTER (WHERE revoked_at IS NULL AND expires_at <= $now) AS expired,
       count(*) FILTER (WHERE revoked_at IS NOT NULL) AS revoked
     FROM api_keys`,
    { now: millis(now) },
  );
  return { active: Number(row?.active ?? 0), disabled: Number(row?.disabled ?? 0), expired: Number(row?.expired ?? 0), revoked: Number(row?.revoked ?? 0) };
}

function keyOf(session: SqliteSession, id: number): ApiKeyRow | null {
  const row = session.get<ApiKeyRecord>('SELECT * FROM api_keys WHERE id = $id', { id });
  return row ? toApiKey(row) : null;
}

/** Every column the lifecycle may change, written from the row as decided. */
function writeKey(session: SqliteSession, row: ApiKeyRow): ApiKeyRow {
  const { name, agent_id, scopes, expires_at, enabled, rate_limit_requests, rate_limit_per_seconds, rotated_to } = apiKeyParameters(row);
  const written = session.get<ApiKeyRecord>(
    `UPDATE api_keys SET name = $name, scopes = $scopes, agent_id = $agent_id, expires_at = $expires_at, enabled = $enabled,
       rate_limit_requests = $rate_limit_requests, rate_limit_per_seconds = $rate_limit_per_seconds, updated_at = $updated_at,
       revoked_at = $revoked_at, rotated_to = $rotated_to
     WHERE id = $id RETURNING *`,
    {
      id: row.id,
      name,
      agent_id,
      scopes,
      expires_at,
      enabled,
      rate_limit_requests,
      rate_limit_per_seconds,
      rotated_to,
      updated_at: millis(row.updatedAt),
      revoked_at: millisOrNull(row.revokedAt),
    },
  );
  if (!written) throw new Error('UPDATE … RETURNING returned no row');
  return toApiKey(written);
}
