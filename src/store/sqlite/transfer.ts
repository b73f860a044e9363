import type { DatabaseSync } from 'node:sqlite';
import { describeHoldings, StoreNotEmptyError, type StoreData } from '../store.ts';
import {
  apiKeyParameters,
  auditParameters,
  millis,
  millisOrNull,
  toAdmin,
  toApiKey,
  toAuditEvent,
  type AdminRecord,
  type ApiKeyRecord,
  type AuditEventRecord,
} from './rows.ts';
import { sessionParameters, toAdminSession, type AdminSessionRecord } from './admin-sessions.ts';
import { inReadTransaction, inTransaction } from './transaction.ts';

/** Everything the file holds, in one read transaction. */
export function exportSqlite(db: DatabaseSync): StoreData {
  return inReadTransaction(db, () => ({
    admins: (db.prepare('SELECT * FROM admins ORDER BY id').all() as unknown as AdminRecord[]).map(toAdmin),
    apiKeys: (db.prepare('SELECT * FROM api_keys ORDER BY id').all() as unknown as ApiKeyRecord[]).map(toApiKey),
    auditEvents: (db.prepare('SELECT * FROM audit_events ORDER BY id').all() as unknown as AuditEventRecord[]).map(toAuditEvent),
    settings: (db.prepare('SELECT name, value FROM settings ORDER BY name').all() as unknown as StoreData['settings']).map(
      ({ name, value }) => ({ name, value }),
    ),
    adminSessions: (db.prepare('SELECT * FROM admin_sessions ORDER BY created_at, id').all() as unknown as AdminSessionRecord[]).map(toAdminSession),
  }));
}

/**
 * Writes `data` with its ids in one transaction, refusing a store that holds anything. The
 * AUTOINCREMENT sequences move past the largest id written by themselves, so the next id
 * created here continues after the imported ones.
 */
export function importSqlite(db: DatabaseSync, data: StoreData): void {
  inTransaction(db, () => {
    const held = contents(db);
    if (held !== null) throw new StoreNotEmptyError(held);
    const admin = db.prepare('INSERT INTO admins (id, email, password_hash, created_at) VALUES ($id, $email, $password_hash, $created_at)');
    for (const row of data.admins) {
      admin.run({ id: row.id, email: row.email, password_hash: row.passwordHash, created_at: millis(row.createdAt) });
    }
    const key = db.prepare(
      `INSERT INTO api_keys (id, name, agent_id, key_prefix, key_hash, scopes, created_at, last_used_at, expires_at, revoked_at,
         enabled, updated_at, rate_limit_requests, rate_limit_per_seconds, rotated_from, rotated_to)
       VALUES ($id, $name, $agent_id, $key_prefix, $key_hash, $scopes, $created_at, $last_used_at, $expires_at, $revoked_at,
         $enabled, $updated_at, $rate_limit_requests, $rate_limit_per_seconds, $rotated_from, $rotated_to)`,
    );
    for (const row of data.apiKeys) {
      key.run({
        id: row.id,
        ...apiKeyParameters(row),
        created_at: millis(row.createdAt),
        last_used_at: millisOrNull(row.lastUsedAt),
        revoked_at: millisOrNull(row.revokedAt),
        updated_at: millis(row.updatedAt),
      });
    }
    const event = db.prepare(
      `INSERT INTO audit_events (id, at, action, actor_kind, actor_id, subject_id, client_address, detail)
       VALUES ($id, $at, $action, $actor_kind, $actor_id, $subject_id, $client_address, $detail)`,
    );
    for (const row of data.auditEvents) event.run({ id: row.id, ...auditParameters(row) });
    const setting = db.prepare('INSERT INTO settings (name, value) VALUES (?, ?)');
    for (const row of data.settings) setting.run(row.name, row.value);
    const session = db.prepare(
      `INSERT INTO admin_sessions (id, admin_id, created_at, expires_at, client_address, ended_at)
       VALUES ($id, $admin_id, $created_at, $expires_at, $client_address, $ended_at)`,
    );
    for (const row of data.adminSessions) session.run(sessionParameters(row));
  });
}

/** What the store holds, in words ("1 admin, 3 API keys"), or null when it holds nothing. */
function contents(db: DatabaseSync): string | null {
  return describeHoldings((table) => Number(db.prepare(`SELECT count(*) AS n FROM ${table}`).get()?.n ?? 0));
}
