import type { AdminSessionRow, AuditOf, NewAuditEvent, SessionMatch } from '../store.ts';
import { millis, millisOrNull } from './rows.ts';

/** Admin sessions on SQLite (the `Store` methods of the same names), run by the store on its connection. */

export interface AdminSessionRecord {
  id: string;
  admin_id: number;
  created_at: number;
  expires_at: number;
  client_address: string | null;
  ended_at: number | null;
}

interface Session {
  get<R>(sql: string, parameters?: Record<string, string | number | null>): R | undefined;
  all<R>(sql: string, parameters?: Record<string, string | number | null>): R[];
  appendAudit(event: NewAuditEvent): void;
}

export function toAdminSession(row: AdminSessionRecord): AdminSessionRow {
  return {
    id: row.id,
    adminId: row.admin_id,
    createdAt: new Date(row.created_at),
    expiresAt: new Date(row.expires_at),
    clientAddress: row.client_address,
    endedAt: row.ended_at === null ? null : new Date(row.ended_at),
  };
}

/** A day past expiry: long enough for no replica's clock to still take the token as valid. */
const KEEP_EXPIRED_MS = 24 * 60 * 60_000;

export function sessionParameters(session: AdminSessionRow) {
  return {
    id: session.id,
    admin_id: session.adminId,
    created_at: millis(session.createdAt),
    expires_at: millis(session.expiresAt),
    client_address: session.clientAddress,
    ended_at: millisOrNull(session.endedAt),
  };
}

export function createAdminSession(db: Session, session: AdminSessionRow, passwordHash?: string): boolean {
  db.get('DELETE FROM admin_sessions WHERE expires_at < $before', { before: millis(session.createdAt) - KEEP_EXPIRED_MS });
  const row = db.get<{ id: string }>(
    `INSERT INTO admin_sessions (id, admin_id, created_at, expires_at, client_address, ended_at)
     SELECT $id, $admin_id, $created_at, $expires_at, $client_address, $ended_at
     WHERE $hash IS NULL OR EXISTS (SELECT 1 FROM admins WHERE id = $admin_id AND password_hash = $hash)
     ON CONFLICT (id) DO NOTHING RETURNING id`,
    { ...sessionParameters(session), hash: passwordHash ?? null },
  );
  return row !== undefined;
}

export function listAdminSessions(db: Session, adminId: number, now: Date): AdminSessionRow[] {
  return db
    .all<AdminSessionRecord>('SELECT * FROM admin_sessions WHERE admin_id = $admin AND ended_at IS NULL AND expires_at > $now ORDER BY created_at, id', {
      admin: adminId,
      now: millis(now),
    })
    .map(toAdminSession);
}

export function findAdminSession(db: Session, id: string): AdminSessionRow | null {
  const row = db.get<AdminSessionRecord>('SELECT * FROM admin_sessions WHERE id = $id', { id });
  return row ? toAdminSession(row) : null;
}

export function endAdminSessions(db: Session, match: SessionMatch, now: Date, audit?: AuditOf<AdminSessionRow>): AdminSessionRow[] {
  const ended = db
    .all<AdminSessionRecord>(
      `UPDATE admin_sessions SET ended_at = $now
       WHERE admin_id = $admin AND ended_at IS NULL AND expires_at > $now
         AND ($id IS NULL OR id = $id) AND ($except IS NULL OR id <> $except)
       RETURNING *`,
      { admin: match.adminId, now: millis(now), id: match.id ?? null, except: match.exceptId ?? null },
    )
    .map(toAdminSession);
  if (audit) for (const row of ended) db.appendAudit(audit(row));
  return ended;
}

export function listEndedAdminSessions(db: Session, now: Date): Array<{ id: string; adminId: number; expiresAt: Date }> {
  return db
    .all<{ id: string; admin_id: number; expires_at: number }>('SELECT id, admin_id, expires_at FROM admin_sessions WHERE ended_at IS NOT NULL AND expires_at > $now', { now: millis(now) })
    .map((row) => ({ id: row.id, adminId: row.admin_id, expiresAt: new Date(row.expires_at) }));
}
