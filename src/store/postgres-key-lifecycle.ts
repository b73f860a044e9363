import { isLive, patched, rotation, stillInGrace } from './key-lifecycle.ts';
import { insertAuditEvent, toApiKey, type ApiKeyRecord } from './postgres-rows.ts';
import type { SqlExecutor, SqlSession } from './sql.ts';
import type { ApiKeyPatch, ApiKeyRow, AuditOfUpdate, NewAuditEvent, RotateKeyResult, UpdateKeyResult } from './store.ts';

/** The key lifecycle's writes on PostgreSQL (`Store.updateApiKey`, `Store.rotateApiKey`); the rules are key-lifecycle.ts's. */

/** The counted keys, as the create's licence check counts them (key-lifecycle.ts, `countsTowardsLicence`); `$1` is now. */
export const COUNTED_KEYS = `revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)
  AND (rotated_to IS NULL OR NOT EXISTS (
    SELECT 1 FROM api_keys AS successor
    WHERE successor.id = api_keys.rotated_to AND successor.revoked_at IS NULL AND (successor.expires_at IS NULL OR successor.expires_at > $1)))`;

export async function updateApiKey(
  db: SqlExecutor,
  id: number,
  patch: ApiKeyPatch,
  options: { now: Date; limit: number | null; audit?: AuditOfUpdate },
): Promise<UpdateKeyResult> {
  return db.transaction(async (tx): Promise<UpdateKeyResult> => {
    // An enable, or a later expiry that makes an expired key count again, counts like a create:
    // serialised with creates (the lock before the row's, as creates take it), so the cap holds
    // under concurrency. Which of the two it is shows only once the row is read.
    const mayCountAgain = patch.enabled === true || patch.expiresAt !== undefined;
    if (mayCountAgain && options.limit !== null) await tx.query('SELECT id FROM api_key_create_lock FOR UPDATE');
    const before = await lockKey(tx, id);
    if (before === null) return { ok: false, reason: 'not_found' };
    const next = patched(before, patch, options.now, await successorLive(tx, before, options.now));
    if ('refused' in next) return { ok: false, reason: next.refused };
    if (next.checksLicence && options.limit !== null) {
      const [row] = await tx.query<{ count: number }>(`SELECT count(*)::int AS count FROM api_keys WHERE ${COUNTED_KEYS} AND id <> $2`, [options.now, id]);
      if ((row?.count ?? 0) >= options.limit) return { ok: false, reason: 'license_limit' };
    }
    if (next.changed.length === 0) return { ok: true, key: before, before };
    const key = await writeKey(tx, next.after);
    for (const event of options.audit?.(before, key) ?? []) await insertAuditEvent(tx, event);
    return { ok: true, key, before };
  });
}

export async function rotateApiKey(
  db: SqlExecutor,
  id: number,
  next: { keyPrefix: string; keyHash: string },
  options: { now: Date; graceMs: number; audit?: (old: ApiKeyRow, next: ApiKeyRow, revoked: readonly number[]) => NewAuditEvent },
): Promise<RotateKeyResult> {
  const { now } = options;
  return db.transaction(async (tx): Promise<RotateKeyResult> => {
    const { old, predecessor } = await lockChain(tx, id);
    if (old === null) return { ok: false, reason: 'not_found' };
    const change = rotation(old, now, options.graceMs);
    if ('refused' in change) return { ok: false, reason: change.refused };
    const [inserted] = await tx.query<ApiKeyRecord>(
      `INSERT INTO api_keys (name, agent_id, key_prefix, key_hash, scopes, created_at, updated_at, expires_at, enabled,
         rate_limit_requests, rate_limit_per_seconds, rotated_from)
       VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9, $10, $11) RETURNING *`,
      [old.name, old.agentId, next.keyPrefix, next.keyHash, old.scopes, now, old.expiresAt, old.enabled, old.rateLimit?.requests ?? null, old.rateLimit?.perSeconds ?? null, old.id],
    );
    if (!inserted) throw new Error('INSERT … RETURNING returned no row');
    const key = toApiKey(inserted);
    const replaced = await writeKey(tx, { ...old, expiresAt: change.expiresAt, revokedAt: change.revokedAt, rotatedTo: key.id, updatedAt: now });
    const revoked = change.revokedAt === null ? [] : [old.id];
    // At most two live keys in a chain: a predecessor still in its grace period ends now.
    if (stillInGrace(predecessor, old, now)) {
      await writeKey(tx, { ...predecessor, revokedAt: now, updatedAt: now });
      revoked.push(predecessor.id);
    }
    if (options.audit) await insertAuditEvent(tx, options.audit(replaced, key, revoked));
    return { ok: true, key, old: replaced, revoked };
  });
}

/** Counts by status; `active` and `disabled` are the keys that accept requests or may again. */
export async function countKeysByStatus(db: SqlExecutor, now: Date): Promise<{ active: number; disabled: number; expired: number; revoked: number }> {
  const [row] = await db.query<{ active: number; disabled: number; expired: number; revoked: number }>(
    `SELECT
       count(*) FILTER (WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1) AND enabled)::int AS active,
       count(*) FILTER (WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1) AND NOT enabled)::int AS disabled,
       count(*) FILTER (WHERE revoked_at IS NULL AND expires_at <= $1)::int AS expired,
       count(*) FILTER (WHERE revoked_at IS NOT NULL)::int AS revoked
     FROM api_keys`,
    [now],
  );
  return row ?? { active: 0, disabled: 0, expired: 0, revoked: 0 };
}

/**
 * The key and the one it replaced, locked in id order: the write-behind of `last_used_at`
 * locks in id order too, so the two never wait on each other in a cycle.
 */
async function lockChain(tx: SqlSession, id: number): Promise<{ old: ApiKeyRow | null; predecessor: ApiKeyRow | null }> {
  const rows = (
    await tx.query<ApiKeyRecord>(
      'SELECT * FROM api_keys WHERE id = $1 OR id = (SELECT rotated_from FROM api_keys WHERE id = $1) ORDER BY id FOR UPDATE',
      [id],
    )
  ).map(toApiKey);
  const old = rows.find((row) => row.id === id) ?? null;
  return { old, predecessor: rows.find((row) => row.id !== id) ?? null };
}

/** Whether the key is in a grace period whose successor still accepts requests (then it counts towards no licence). */
async function successorLive(tx: SqlSession, key: ApiKeyRow, now: Date): Promise<boolean> {
  if (key.rotatedTo === null) return false;
  const [row] = await tx.query<ApiKeyRecord>('SELECT * FROM api_keys WHERE id = $1', [key.rotatedTo]);
  return row !== undefined && isLive(toApiKey(row), now);
}

async function lockKey(tx: SqlSession, id: number): Promise<ApiKeyRow | null> {
  const [row] = await tx.query<ApiKeyRecord>('SELECT * FROM api_keys WHERE id = $1 FOR UPDATE', [id]);
  return row ? toApiKey(row) : null;
}

/** Every column the lifecycle may change, written from the row as decided. */
async function writeKey(tx: SqlSession, row: ApiKeyRow): Promise<ApiKeyRow> {
  const [written] = await tx.query<ApiKeyRecord>(
    `UPDATE api_keys SET name = $2, scopes = $3, agent_id = $4, expires_at = $5, enabled = $6, rate_limit_requests = $7,
       rate_limit_per_seconds = $8, updated_at = $9, revoked_at = $10, rotated_to = $11
     WHERE id = $1 RETURNING *`,
    [row.id, row.name, row.scopes, row.agentId, row.expiresAt, row.enabled, row.rateLimit?.requests ?? null, row.rateLimit?.perSeconds ?? null, row.updatedAt, row.revokedAt, row.rotatedTo],
  );
  if (!written) throw new Error('UPDATE … RETURNING returned no row');
  return toApiKey(written);
}


