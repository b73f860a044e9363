import { toAdminSession, type AdminSessionRecord } from './postgres-admin-sessions.ts';
import type { SqlSession } from './sql.ts';
import { describeHoldings, STORED_TABLES, type AdminRow, type ApiKeyRow, type AuditEventRow, type NewAuditEvent, type StoreData } from './store.ts';

/** The rows of PostgresStore's tables as `pg` returns them, and their mapping to the store's rows. */
export interface AdminRecord {
  id: number;
  email: string;
  password_hash: string;
  created_at: Date;
}

export interface ApiKeyRecord {
  id: number;
  name: string;
  agent_id: number | null;
  key_prefix: string;
  key_hash: string;
  scopes: string[];
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
  enabled: boolean;
  updated_at: Date;
  rate_limit_requests: number | null;
  rate_limit_per_seconds: number | null;
  rotated_from: number | null;
  rotated_to: number | null;
}

export interface AuditEventRecord {
  id: number;
  at: Date;
  action: string;
  actor_kind: string | null;
  actor_id: string | null;
  subject_id: string | null;
  client_address: string | null;
  detail: Record<string, unknown>;
}

export function toAdmin(row: AdminRecord): AdminRow {
  return { id: row.id, email: row.email, passwordHash: row.password_hash, createdAt: row.created_at };
}

export function toApiKey(row: ApiKeyRecord): ApiKeyRow {
  return {
    id: row.id,
    name: row.name,
    agentId: row.agent_id,
    keyPrefix: row.key_prefix,
    keyHash: row.key_hash,
    scopes: row.scopes,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    enabled: row.enabled,
    updatedAt: row.updated_at,
    rateLimit: row.rate_limit_requests === null || row.rate_limit_per_seconds === null ? null : { requests: row.rate_limit_requests, perSeconds: row.rate_limit_per_seconds },
    rotatedFrom: row.rotated_from,
    rotatedTo: row.rotated_to,
  };
}

export function toAuditEvent(row: AuditEventRecord): AuditEventRow {
  return {
    id: row.id,
    at: row.at,
    action: row.action,
    actorKind: row.actor_kind,
    actorId: row.actor_id,
    subjectId: row.subject_id,
    clientAddress: row.client_address,
    detail: row.detail,
  };
}

/** Appends one event on `db`: the pool, or the transaction of the change the event records. */
export async function insertAuditEvent(db: SqlSession, event: NewAuditEvent): Promise<AuditEventRow> {
  const [row] = await db.query<AuditEventRecord>(
    `INSERT INTO audit_events (at, action, actor_kind, actor_id, subject_id, client_address, detail)
     VALUES (COALESCE($1::timestamptz, now()), $2, $3, $4, $5, $6, $7::jsonb) RETURNING *`,
    [event.at ?? null, event.action, event.actorKind, event.actorId, event.subjectId, event.clientAddress, JSON.stringify(event.detail)],
  );
  if (!row) throw new Error('INSERT … RETURNING returned no row');
  return toAuditEvent(row);
}

/** Everything, read by the caller inside one REPEATABLE READ transaction. */
export async function selectAll(tx: SqlSession): Promise<StoreData> {
  return {
    admins: (await tx.query<AdminRecord>('SELECT * FROM admins ORDER BY id')).map(toAdmin),
    apiKeys: (await tx.query<ApiKeyRecord>('SELECT * FROM api_keys ORDER BY id')).map(toApiKey),
    auditEvents: (await tx.query<AuditEventRecord>('SELECT * FROM audit_events ORDER BY id')).map(toAuditEvent),
    // Byte order, as SQLite sorts: the export reads the same whichever store it came from.
    settings: await tx.query<{ name: string; value: string }>('SELECT name, value FROM settings ORDER BY name COLLATE "C"'),
    adminSessions: (await tx.query<AdminSessionRecord>('SELECT * FROM admin_sessions ORDER BY created_at, id COLLATE "C"')).map(toAdminSession),
  };
}

/**
 * Rows per INSERT: each batch travels as one jsonb parameter, so a large audit trail neither
 * makes one statement per row nor one parameter of hundreds of megabytes.
 */
const IMPORT_BATCH = 1_000;

/**
 * Each table's INSERT of a batch, ids kept: OVERRIDING SYSTEM VALUE lets the identity columns
 * take them; jsonb_to_recordset turns the JSON of the rows (dates as ISO strings, scopes as
 * arrays) back into the columns' types.
 */
const IMPORTS = {
  admins: `INSERT INTO admins (id, email, password_hash, created_at) OVERRIDING SYSTEM VALUE
    SELECT id, email, password_hash, created_at FROM jsonb_to_recordset($1::jsonb)
      AS r(id integer, email text, password_hash text, created_at timestamptz)`,
  api_keys: `INSERT INTO api_keys (id, name, agent_id, key_prefix, key_hash, scopes, created_at, last_used_at, expires_at, revoked_at,
      enabled, updated_at, rate_limit_requests, rate_limit_per_seconds, rotated_from, rotated_to)
    OVERRIDING SYSTEM VALUE
    SELECT id, name, agent_id, key_prefix, key_hash, scopes, created_at, last_used_at, expires_at, revoked_at,
      enabled, updated_at, rate_limit_requests, rate_limit_per_seconds, rotated_from, rotated_to
    FROM jsonb_to_recordset($1::jsonb) AS r(id bigint, name text, agent_id bigint, key_prefix text, key_hash text,
      scopes text[], created_at timestamptz, last_used_at timestamptz, expires_at timestamptz, revoked_at timestamptz,
      enabled boolean, updated_at timestamptz, rate_limit_requests integer, rate_limit_per_seconds integer, rotated_from bigint, rotated_to bigint)`,
  audit_events: `INSERT INTO audit_events (id, at, action, actor_kind, actor_id, subject_id, client_address, detail)
    OVERRIDING SYSTEM VALUE
    SELECT id, at, action, actor_kind, actor_id, subject_id, client_address, detail FROM jsonb_to_recordset($1::jsonb)
      AS r(id bigint, at timestamptz, action text, actor_kind text, actor_id text, subject_id text, client_address text, detail jsonb)`,
  settings: `INSERT INTO settings (name, value) SELECT name, value FROM jsonb_to_recordset($1::jsonb) AS r(name text, value text)`,
  admin_sessions: `INSERT INTO admin_sessions (id, admin_id, created_at, expires_at, client_address, ended_at)
    SELECT id, admin_id, created_at, expires_at, client_address, ended_at FROM jsonb_to_recordset($1::jsonb)
      AS r(id text, admin_id integer, created_at timestamptz, expires_at timestamptz, client_address text, ended_at timestamptz)`,
} as const;

/** Inserts `data` with its ids, inside the caller's transaction, and moves each identity sequence past them. */
export async function insertAll(tx: SqlSession, data: StoreData): Promise<void> {
  await insertBatches(tx, IMPORTS.admins, data.admins.map((row) => ({
    id: row.id,
    email: row.email,
    password_hash: row.passwordHash,
    created_at: row.createdAt,
  })));
  await insertBatches(tx, IMPORTS.api_keys, data.apiKeys.map((row) => ({
    id: row.id,
    name: row.name,
    agent_id: row.agentId,
    key_prefix: row.keyPrefix,
    key_hash: row.keyHash,
    scopes: row.scopes,
    created_at: row.createdAt,
    last_used_at: row.lastUsedAt,
    expires_at: row.expiresAt,
    revoked_at: row.revokedAt,
    enabled: row.enabled,
    updated_at: row.updatedAt,
    rate_limit_requests: row.rateLimit?.requests ?? null,
    rate_limit_per_seconds: row.rateLimit?.perSeconds ?? null,
    rotated_from: row.rotatedFrom,
    rotated_to: row.rotatedTo,
  })));
  await insertBatches(tx, IMPORTS.audit_events, data.auditEvents.map((row) => ({
    id: row.id,
    at: row.at,
    action: row.action,
    actor_kind: row.actorKind,
    actor_id: row.actorId,
    subject_id: row.subjectId,
    client_address: row.clientAddress,
    detail: row.detail,
  })));
  await insertBatches(tx, IMPORTS.settings, data.settings);
  await insertBatches(tx, IMPORTS.admin_sessions, data.adminSessions.map((row) => ({
    id: row.id,
    admin_id: row.adminId,
    created_at: row.createdAt,
    expires_at: row.expiresAt,
    client_address: row.clientAddress,
    ended_at: row.endedAt,
  })));
  for (const table of ['admins', 'api_keys', 'audit_events']) {
    // max(id) is NULL on an empty table, and setval(…, NULL) leaves the sequence alone.
    await tx.query(`SELECT setval(pg_get_serial_sequence('${table}', 'id'), max(id)) FROM ${table}`);
  }
}

async function insertBatches(tx: SqlSession, statement: string, rows: readonly object[]): Promise<void> {
  for (let start = 0; start < rows.length; start += IMPORT_BATCH) {
    await tx.query(statement, [JSON.stringify(rows.slice(start, start + IMPORT_BATCH))]);
  }
}

/** What the store holds, in words ("1 admin, 3 API keys"), or null when it holds nothing. */
export async function contents(tx: SqlSession): Promise<string | null> {
  const [counts] = await tx.query<Record<string, number>>(
    `SELECT ${STORED_TABLES.map(([table]) => `(SELECT count(*)::int FROM ${table}) AS ${table}`).join(', ')}`,
  );
  return describeHoldings((table) => counts?.[table] ?? 0);
}
