import { insertAuditEvent } from './postgres-rows.ts';
import type { SqlExecutor, SqlSession } from './sql.ts';
import type { AdminSessionRow, AuditOf, SessionMatch } from './store.ts';

/** Admin sessions on PostgreSQL (the `Store` methods of the same names). */

export interface AdminSessionRecord {
  id: string;
  admin_id: number;
  created_at: Date;
  expires_at: Date;
  client_address: string | null;
  ended_at: Date | null;
}

export function toAdminSession(row: AdminSessionRecord): AdminSessionRow {
  return { id: row.id, adminId: row.admin_id, createdAt: row.created_at, expiresAt: row.expires_at, clientAddress: row.client_address, endedAt: row.ended_at };
}

/** A day past expiry: long enough for no replica's clock to still take the token as valid. */
const KEEP_EXPIRED = "interval '24 hours'";

export async function createAdminSession(db: SqlExecutor, session: AdminSessionRow, passwordHash?: string): Promise<boolean> {
  // A day before the new session's creation, by the caller's clock as every other time here (and as on SQLite).
  await db.query(`DELETE FROM admin_sessions WHERE expires_at < $1::timestamptz - ${KEEP_EXPIRED}`, [session.createdAt]);
  // One statement: the hash is compared where the row is written, so a password change commits either before (no row) or after (the row is there to end).
  const rows = await db.query<{ id: string }>(
    `INSERT INTO admin_sessions (id, admin_id, created_at, expires_at, client_address, ended_at)
     SELECT $1, $2, $3, $4, $5, $6 WHERE $7::text IS NULL OR EXISTS (SELECT 1 FROM admins WHERE id = $2 AND password_hash = $7)
     ON CONFLICT (id) DO NOTHING RETURNING id`,
    [session.id, session.adminId, session.createdAt, session.expiresAt, session.clientAddress, session.endedAt, passwordHash ?? null],
  );
  return rows.length === 1;
}

export async function listAdminSessions(db: SqlExecutor, adminId: number, now: Date): Promise<AdminSessionRow[]> {
  const rows = await db.query<AdminSessionRecord>(
    'SELECT * FROM admin_sessions WHERE admin_id = $1 AND ended_at IS NULL AND expires_at > $2 ORDER BY created_at, id',
    [adminId, now],
  );
  return rows.map(toAdminSession);
}

export async function findAdminSession(db: SqlExecutor, id: string): Promise<AdminSessionRow | null> {
  const [row] = await db.query<AdminSessionRecord>('SELECT * FROM admin_sessions WHERE id = $1', [id]);
  return row ? toAdminSession(row) : null;
}

export async function endAdminSessions(db: SqlExecutor, match: SessionMatch, now: Date, audit?: AuditOf<AdminSessionRow>): Promise<AdminSessionRow[]> {
  const end = async (session: SqlSession) => {
    const rows = await session.query<AdminSessionRecord>(
      `UPDATE admin_sessions SET ended_at = $2
       WHERE admin_id = $1 AND ended_at IS NULL AND expires_at > $2
         AND ($3::text IS NULL OR id = $3) AND ($4::text IS NULL OR id <> $4)
       RETURNING *`,
      [match.adminId, now, match.id ?? null, match.exceptId ?? null],
    );
    const ended = rows.map(toAdminSession);
    if (audit) for (const row of ended) await insertAuditEvent(session, audit(row));
    return ended;
  };
  return audit ? db.transaction(end) : end(db);
}

export async function listEndedAdminSessions(db: SqlExecutor, now: Date): Promise<Array<{ id: string; adminId: number; expiresAt: Date }>> {
  const rows = await db.query<{ id: string; admin_id: number; expires_at: Date }>('SELECT id, admin_id, expires_at FROM admin_sessions WHERE ended_at IS NOT NULL AND expires_at > $1', [now]);
  return rows.map((row) => ({ id: row.id, adminId: row.admin_id, expiresAt: row.expires_at }));
}
