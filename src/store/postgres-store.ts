import {
  contents,
  insertAll,
  insertAuditEvent,
  selectAll,
  toAdmin,
  toApiKey,
  toAuditEvent,
  type AdminRecord,
  type ApiKeyRecord,
  type AuditEventRecord,
} from './postgres-rows.ts';
import { createAdminSession, endAdminSessions, findAdminSession, listAdminSessions, listEndedAdminSessions } from './postgres-admin-sessions.ts';
import { COUNTED_KEYS, countKeysByStatus, rotateApiKey, updateApiKey } from './postgres-key-lifecycle.ts';
import type { SqlExecutor, SqlSession } from './sql.ts';
import {
  StoreNotEmptyError,
  type AdminRow,
  type AdminSessionRow,
  type SessionMatch,
  type ApiKeyRow,
  type AuditEventRow,
  type ApiKeyPatch,
  type AuditOf,
  type AuditOfUpdate,
  type CreateKeyResult,
  type NewApiKey,
  type NewAuditEvent,
  type RotateKeyResult,
  type Store,
  type StoreData,
  type UpdateKeyResult,
} from './store.ts';

/** `Store` on PostgreSQL. */
export class PostgresStore implements Store {
  readonly kind: Store['kind'];
  readonly #db: SqlExecutor;

  constructor(db: SqlExecutor) {
    this.#db = db;
    this.kind = db.kind;
  }

  async ping(): Promise<void> {
    await this.#db.query('SELECT 1');
  }

  close(): Promise<void> {
    return this.#db.close();
  }

  async countAdmins(): Promise<number> {
    const [row] = await this.#db.query<{ count: number }>('SELECT count(*)::int AS count FROM admins');
    return row?.count ?? 0;
  }

  async findAdminByEmail(email: string): Promise<AdminRow | null> {
    const rows = await this.#db.query<AdminRecord>('SELECT * FROM admins WHERE email = $1', [normaliseEmail(email)]);
    return rows[0] ? toAdmin(rows[0]) : null;
  }

  async findAdminById(id: number): Promise<AdminRow | null> {
    const rows = await this.#db.query<AdminRecord>('SELECT * FROM admins WHERE id = $1', [id]);
    return rows[0] ? toAdmin(rows[0]) : null;
  }

  async listAdmins(): Promise<AdminRow[]> {
    return (await this.#db.query<AdminRecord>('SELECT * FROM admins ORDER BY id')).map(toAdmin);
  }

  async createAdmin(email: string, passwordHash: string, audit?: AuditOf<AdminRow>): Promise<{ admin: AdminRow; created: boolean }> {
    const inserted = await this.#withEvent(async (db) => {
      const [row] = await db.query<AdminRecord>(
        'INSERT INTO admins (email, password_hash) VALUES ($1, $2) ON CONFLICT (email) DO NOTHING RETURNING *',
        [normaliseEmail(email), passwordHash],
      );
      return row ? toAdmin(row) : null;
    }, audit);
    if (inserted) return { admin: inserted, created: true };
    const existing = await this.findAdminByEmail(email);
    if (!existing) throw new Error('admin vanished between insert and select');
    return { admin: existing, created: false };
  }

  async setAdminPassword(id: number, passwordHash: string, audit?: AuditOf<AdminRow>): Promise<void> {
    await this.#withEvent(async (db) => {
      const [row] = await db.query<AdminRecord>('UPDATE admins SET password_hash = $2 WHERE id = $1 RETURNING *', [id, passwordHash]);
      return row ? toAdmin(row) : null;
    }, audit);
  }

  async replaceAdminPasswordHash(id: number, expected: string, passwordHash: string): Promise<boolean> {
    const rows = await this.#db.query<{ id: number }>(
      'UPDATE admins SET password_hash = $3 WHERE id = $1 AND password_hash = $2 RETURNING id',
      [id, expected, passwordHash],
    );
    return rows.length === 1;
  }

  async getOrCreateSetting(name: string, candidate: string): Promise<string> {
    // Two statements on purpose: the SELECT takes a fresh snapshot, so it sees a value that a
    // concurrent replica committed while our INSERT waited on it and then did nothing.
    await this.#db.query('INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
      name,
      candidate,
    ]);
    const [row] = await this.#db.query<{ value: string }>('SELECT value FROM settings WHERE name = $1', [name]);
    if (!row) throw new Error(`setting ${name} vanished between insert and select`);
    return row.value;
  }

  async createApiKey(input: NewApiKey, limit: number | null, now: Date, audit?: AuditOf<ApiKeyRow>): Promise<CreateKeyResult> {
    try {
      return await this.#db.transaction(async (tx): Promise<CreateKeyResult> => {
        // Held until COMMIT: the next create counts only after our insert is visible.
        await tx.query('SELECT id FROM api_key_create_lock FOR UPDATE');
        if (limit !== null) {
          const [row] = await tx.query<{ count: number }>(`SELECT count(*)::int AS count FROM api_keys WHERE ${COUNTED_KEYS}`, [now]);
          if ((row?.count ?? 0) >= limit) return { ok: false, reason: 'license_limit' };
        }
        const [row] = await tx.query<ApiKeyRecord>(
          `INSERT INTO api_keys (name, agent_id, key_prefix, key_hash, scopes, created_at, updated_at, expires_at, enabled,
             rate_limit_requests, rate_limit_per_seconds)
           VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9, $10) RETURNING *`,
          [input.name, input.agentId, input.keyPrefix, input.keyHash, input.scopes, now, input.expiresAt, input.enabled ?? true,
            input.rateLimit?.requests ?? null, input.rateLimit?.perSeconds ?? null],
        );
        if (!row) throw new Error('INSERT … RETURNING returned no row');
        const key = toApiKey(row);
        if (audit) await insertAuditEvent(tx, audit(key));
        return { ok: true, key };
      });
    } catch (error) {
      if (isPrefixConflict(error)) return { ok: false, reason: 'prefix_taken' };
      throw error;
    }
  }

  async listApiKeys(): Promise<ApiKeyRow[]> {
    return (await this.#db.query<ApiKeyRecord>('SELECT * FROM api_keys ORDER BY id')).map(toApiKey);
  }

  async findApiKeyById(id: number): Promise<ApiKeyRow | null> {
    const rows = await this.#db.query<ApiKeyRecord>('SELECT * FROM api_keys WHERE id = $1', [id]);
    return rows[0] ? toApiKey(rows[0]) : null;
  }

  async findApiKeyByPrefix(prefix: string): Promise<ApiKeyRow | null> {
    const rows = await this.#db.query<ApiKeyRecord>('SELECT * FROM api_keys WHERE key_prefix = $1', [prefix]);
    return rows[0] ? toApiKey(rows[0]) : null;
  }

  async revokeApiKey(id: number, now: Date, audit?: AuditOf<ApiKeyRow>): Promise<ApiKeyRow | null> {
    return this.#withEvent(async (db) => {
      const [row] = await db.query<ApiKeyRecord>(
        'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING *',
        [id, now],
      );
      return row ? toApiKey(row) : null;
    }, audit);
  }

  async recordKeyUses(uses: ReadonlyMap<number, Date>): Promise<void> {
    if (uses.size === 0) return;
    // Timestamps as ISO strings, which timestamptz[] reads as they are, whatever the session's time zone.
    // The rows locked in id order first, as a rotation locks its two keys: no cycle of waits
    // between a flush and a rotation (or two replicas' flushes) holding the same keys.
    await this.#db.query(
      `WITH locked AS (SELECT id FROM api_keys WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE)
       UPDATE api_keys AS k SET last_used_at = v.t
       FROM unnest($1::bigint[], $2::timestamptz[]) AS v(id, t), locked
       WHERE k.id = v.id AND locked.id = k.id AND (k.last_used_at IS NULL OR k.last_used_at < v.t)`,
      [[...uses.keys()], [...uses.values()].map((at) => at.toISOString())],
    );
  }

  updateApiKey(id: number, patch: ApiKeyPatch, options: { now: Date; limit: number | null; audit?: AuditOfUpdate }): Promise<UpdateKeyResult> {
    return updateApiKey(this.#db, id, patch, options);
  }

  async rotateApiKey(
    id: number,
    next: { keyPrefix: string; keyHash: string },
    options: { now: Date; graceMs: number; audit?: (old: ApiKeyRow, next: ApiKeyRow, revoked: readonly number[]) => NewAuditEvent },
  ): Promise<RotateKeyResult> {
    try {
      return await rotateApiKey(this.#db, id, next, options);
    } catch (error) {
      if (isPrefixConflict(error)) return { ok: false, reason: 'prefix_taken' };
      throw error;
    }
  }

  countKeysByStatus(now: Date): Promise<{ active: number; disabled: number; expired: number; revoked: number }> {
    return countKeysByStatus(this.#db, now);
  }

  createAdminSession(session: AdminSessionRow, passwordHash?: string): Promise<boolean> {
    return createAdminSession(this.#db, session, passwordHash);
  }

  listAdminSessions(adminId: number, now: Date): Promise<AdminSessionRow[]> {
    return listAdminSessions(this.#db, adminId, now);
  }

  findAdminSession(id: string): Promise<AdminSessionRow | null> {
    return findAdminSession(this.#db, id);
  }

  endAdminSessions(match: SessionMatch, now: Date, audit?: AuditOf<AdminSessionRow>): Promise<AdminSessionRow[]> {
    return endAdminSessions(this.#db, match, now, audit);
  }

  listEndedAdminSessions(now: Date): Promise<Array<{ id: string; adminId: number; expiresAt: Date }>> {
    return listEndedAdminSessions(this.#db, now);
  }

  appendAuditEvent(event: NewAuditEvent): Promise<AuditEventRow> {
    return insertAuditEvent(this.#db, event);
  }

  async listAuditEvents(options: { limit: number; before?: number }): Promise<AuditEventRow[]> {
    const rows = await this.#db.query<AuditEventRecord>(
      'SELECT * FROM audit_events WHERE ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $1',
      [options.limit, options.before ?? null],
    );
    return rows.map(toAuditEvent);
  }

  async exportData(): Promise<StoreData> {
    return this.#db.transaction(async (tx) => {
      // One snapshot for the four reads: a key created meanwhile is in none of them or in all.
      await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      return selectAll(tx);
    });
  }

  async importData(data: StoreData): Promise<void> {
    await this.#db.transaction(async (tx) => {
      // Writers wait (readers do not) until COMMIT: nothing lands between the check and the
      // import, such as the JWT secret of a gateway started on the target meanwhile.
      await tx.query('LOCK TABLE admins, api_keys, audit_events, settings, admin_sessions IN EXCLUSIVE MODE');
      const held = await contents(tx);
      if (held !== null) throw new StoreNotEmptyError(held);
      await insertAll(tx, data);
    });
  }

  /**
   * Runs `change` and, when it wrote a row and there is an `audit`, inserts the row's event in
   * the same transaction. Without `audit`, the single statement needs no transaction of its own.
   */
  async #withEvent<T>(change: (db: SqlSession) => Promise<T | null>, audit: AuditOf<T> | undefined): Promise<T | null> {
    if (!audit) return change(this.#db);
    return this.#db.transaction(async (tx) => {
      const row = await change(tx);
      if (row !== null) await insertAuditEvent(tx, audit(row));
      return row;
    });
  }
}

/** Lowercased in JS, not SQL: PostgreSQL's lower() depends on the server's locale. */
function normaliseEmail(email: string): string {
  return email.toLowerCase();
}

function isPrefixConflict(error: unknown): boolean {
  // 23505 unique_violation; pg surfaces the server's error fields.
  const fields = error as { code?: unknown; constraint?: unknown } | null;
  return fields?.code === '23505' && fields.constraint === 'api_keys_key_prefix_key';
}
