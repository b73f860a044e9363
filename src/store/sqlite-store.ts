import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import {
  apiKeyParameters,
  auditParameters,
  millis,
  toAdmin,
  toApiKey,
  toAuditEvent,
  type AdminRecord,
  type ApiKeyRecord,
  type AuditEventRecord,
} from './sqlite/rows.ts';
import { createAdminSession, endAdminSessions, findAdminSession, listAdminSessions, listEndedAdminSessions } from './sqlite/admin-sessions.ts';
import { COUNTED_KEYS, countKeysByStatus, rotateApiKey, updateApiKey, type SqliteSession } from './sqlite/key-lifecycle.ts';
import { inTransaction, unavailableOr } from './sqlite/transaction.ts';
import { isFullVolume, reclaimWal } from './sqlite/wal.ts';
import { exportSqlite, importSqlite } from './sqlite/transfer.ts';
import type {
  AdminRow,
  AdminSessionRow,
  ApiKeyPatch,
  ApiKeyRow,
  AuditEventRow,
  AuditOf,
  AuditOfUpdate,
  CreateKeyResult,
  NewApiKey,
  NewAuditEvent,
  RotateKeyResult,
  SessionMatch,
  Store,
  StoreData,
  UpdateKeyResult,
} from './store.ts';

type Parameters = Record<string, SQLInputValue>;

const LIVE_KEYS = `SELECT count(*) AS count FROM api_keys WHERE ${COUNTED_KEYS}`;

// One statement for the batch: [[id, ms], …] as JSON, joined on the rowid.
const RECORD_USES = `
  UPDATE api_keys SET last_used_at = uses.at
  FROM (SELECT value ->> 0 AS id, value ->> 1 AS at FROM json_each($uses)) AS uses
  WHERE api_keys.id = uses.id AND (api_keys.last_used_at IS NULL OR api_keys.last_used_at < uses.at)`;

/**
 * `Store` on SQLite (`node:sqlite`), the embedded store (docs/adr/0021-embedded-store-sqlite.md).
 * Every call runs synchronously on this thread, so no two of them ever interleave; the methods
 * return promises to keep the interface both stores share.
 */
export class SqliteStore implements Store {
  readonly kind = 'embedded' as const;
  readonly #db: DatabaseSync;
  readonly #release: () => void;
  /** Prepared once per connection: preparing costs more than running most of these. */
  readonly #statements = new Map<string, StatementSync>();
  /** What the key lifecycle's module runs its statements on, inside this store's transactions. */
  readonly #session: SqliteSession = {
    get: (sql, parameters) => this.#get(sql, parameters),
    all: (sql, parameters) => this.#all(sql, parameters),
    appendAudit: (event) => void this.#appendAudit(event),
  };
  #closed = false;

  /** `release`: called once the database is closed (the embedded store's lock). */
  constructor(db: DatabaseSync, release: () => void = () => {}) {
    this.#db = db;
    this.#release = release;
  }

  async ping(): Promise<void> {
    this.#run(() => this.#get('SELECT 1 AS one'));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#statements.clear();
    try {
      this.#db.close();
    } finally {
      this.#release();
    }
  }

  async countAdmins(): Promise<number> {
    return this.#run(() => Number(this.#get<{ count: number }>('SELECT count(*) AS count FROM admins')?.count ?? 0));
  }

  async findAdminByEmail(email: string): Promise<AdminRow | null> {
    return this.#run(() => this.#admin('SELECT * FROM admins WHERE email = $email', { email: email.toLowerCase() }));
  }

  async findAdminById(id: number): Promise<AdminRow | null> {
    return this.#run(() => this.#admin('SELECT * FROM admins WHERE id = $id', { id }));
  }

  async listAdmins(): Promise<AdminRow[]> {
    return this.#run(() => this.#all<AdminRecord>('SELECT * FROM admins ORDER BY id').map(toAdmin));
  }

  async createAdmin(email: string, passwordHash: string, audit?: AuditOf<AdminRow>): Promise<{ admin: AdminRow; created: boolean }> {
    const normalised = email.toLowerCase();
    return this.#write(() => {
      const admin = this.#admin(
        'INSERT INTO admins (email, password_hash, created_at) VALUES ($email, $hash, $now) ON CONFLICT (email) DO NOTHING RETURNING *',
        { email: normalised, hash: passwordHash, now: Date.now() },
      );
      if (admin) {
        if (audit) this.#appendAudit(audit(admin));
        return { admin, created: true };
      }
      const existing = this.#admin('SELECT * FROM admins WHERE email = $email', { email: normalised });
      if (!existing) throw new Error('admin vanished between insert and select');
      return { admin: existing, created: false };
    });
  }

  async setAdminPassword(id: number, passwordHash: string, audit?: AuditOf<AdminRow>): Promise<void> {
    this.#write(() => {
      const admin = this.#admin('UPDATE admins SET password_hash = $hash WHERE id = $id RETURNING *', { id, hash: passwordHash });
      if (admin && audit) this.#appendAudit(audit(admin));
    });
  }

  async replaceAdminPasswordHash(id: number, expected: string, passwordHash: string): Promise<boolean> {
    return this.#run(() => {
      const replaced = this.#get('UPDATE admins SET password_hash = $hash WHERE id = $id AND password_hash = $expected RETURNING id', {
        id,
        expected,
        hash: passwordHash,
      });
      return replaced !== undefined;
    });
  }

  async getOrCreateSetting(name: string, candidate: string): Promise<string> {
    return this.#write(() => {
      this.#get('INSERT INTO settings (name, value) VALUES ($name, $value) ON CONFLICT (name) DO NOTHING', { name, value: candidate });
      const row = this.#get<{ value: string }>('SELECT value FROM settings WHERE name = $name', { name });
      if (!row) throw new Error(`setting ${name} vanished between insert and select`);
      return row.value;
    });
  }

  async createApiKey(input: NewApiKey, limit: number | null, now: Date, audit?: AuditOf<ApiKeyRow>): Promise<CreateKeyResult> {
    return this.#write((): CreateKeyResult => {
      if (limit !== null && Number(this.#get<{ count: number }>(LIVE_KEYS, { now: millis(now) })?.count ?? 0) >= limit) {
        return { ok: false, reason: 'license_limit' };
      }
      const row = this.#get<ApiKeyRecord>(
        `INSERT INTO api_keys (name, agent_id, key_prefix, key_hash, scopes, created_at, updated_at, expires_at, enabled,
           rate_limit_requests, rate_limit_per_seconds, rotated_from, rotated_to)
         VALUES ($name, $agent_id, $key_prefix, $key_hash, $scopes, $created_at, $created_at, $expires_at, $enabled,
           $rate_limit_requests, $rate_limit_per_seconds, $rotated_from, $rotated_to)
         ON CONFLICT (key_prefix) DO NOTHING RETURNING *`,
        { ...apiKeyParameters(input), created_at: millis(now) },
      );
      if (!row) return { ok: false, reason: 'prefix_taken' };
      const key = toApiKey(row);
      if (audit) this.#appendAudit(audit(key));
      return { ok: true, key };
    });
  }

  async listApiKeys(): Promise<ApiKeyRow[]> {
    return this.#run(() => this.#all<ApiKeyRecord>('SELECT * FROM api_keys ORDER BY id').map(toApiKey));
  }

  async findApiKeyById(id: number): Promise<ApiKeyRow | null> {
    return this.#run(() => this.#apiKey('SELECT * FROM api_keys WHERE id = $id', { id }));
  }

  async findApiKeyByPrefix(prefix: string): Promise<ApiKeyRow | null> {
    return this.#run(() => this.#apiKey('SELECT * FROM api_keys WHERE key_prefix = $prefix', { prefix }));
  }

  async revokeApiKey(id: number, now: Date, audit?: AuditOf<ApiKeyRow>): Promise<ApiKeyRow | null> {
    return this.#write(() => {
      const key = this.#apiKey('UPDATE api_keys SET revoked_at = coalesce(revoked_at, $now) WHERE id = $id RETURNING *', {
        id,
        now: millis(now),
      });
      if (key && audit) this.#appendAudit(audit(key));
      return key;
    });
  }

  /**
   * The one write that runs with `synchronous = NORMAL`: a power loss may undo its last few
   * seconds, which a write-behind allows anyway, and it is spared an fsync per batch on this
   * thread. The next durable commit syncs its frames along with its own.
   */
  async recordKeyUses(uses: ReadonlyMap<number, Date>): Promise<void> {
    if (uses.size === 0) return;
    const batch = JSON.stringify(Array.from(uses, ([id, at]) => [id, millis(at)]));
    this.#run(() => {
      const before = this.#get<{ synchronous: number }>('PRAGMA synchronous')?.synchronous ?? 2;
      this.#db.exec('PRAGMA synchronous = NORMAL');
      try {
        this.#statement(RECORD_USES).run({ uses: batch });
      } finally {
        this.#db.exec(`PRAGMA synchronous = ${Number(before)}`);
      }
    });
  }

  async updateApiKey(id: number, patch: ApiKeyPatch, options: { now: Date; limit: number | null; audit?: AuditOfUpdate }): Promise<UpdateKeyResult> {
    return this.#write(() => updateApiKey(this.#session, id, patch, options));
  }

  async rotateApiKey(
    id: number,
    next: { keyPrefix: string; keyHash: string },
    options: { now: Date; graceMs: number; audit?: (old: ApiKeyRow, next: ApiKeyRow, revoked: readonly number[]) => NewAuditEvent },
  ): Promise<RotateKeyResult> {
    return this.#write(() => rotateApiKey(this.#session, id, next, options));
  }

  async countKeysByStatus(now: Date): Promise<{ active: number; disabled: number; expired: number; revoked: number }> {
    return this.#run(() => countKeysByStatus(this.#session, now));
  }

  async createAdminSession(session: AdminSessionRow, passwordHash?: string): Promise<boolean> {
    return this.#write(() => createAdminSession(this.#session, session, passwordHash));
  }

  async listAdminSessions(adminId: number, now: Date): Promise<AdminSessionRow[]> {
    return this.#run(() => listAdminSessions(this.#session, adminId, now));
  }

  async findAdminSession(id: string): Promise<AdminSessionRow | null> {
    return this.#run(() => findAdminSession(this.#session, id));
  }

  async endAdminSessions(match: SessionMatch, now: Date, audit?: AuditOf<AdminSessionRow>): Promise<AdminSessionRow[]> {
    return this.#write(() => endAdminSessions(this.#session, match, now, audit));
  }

  async listEndedAdminSessions(now: Date): Promise<Array<{ id: string; adminId: number; expiresAt: Date }>> {
    return this.#run(() => listEndedAdminSessions(this.#session, now));
  }

  async appendAuditEvent(event: NewAuditEvent): Promise<AuditEventRow> {
    return this.#run(() => this.#appendAudit(event));
  }

  async listAuditEvents(options: { limit: number; before?: number }): Promise<AuditEventRow[]> {
    // Two statements, not "$before IS NULL OR id < $before": a page deep in the trail is then
    // one range of the rowid, not a scan from the newest event down.
    return this.#run(() => {
      const rows =
        options.before === undefined
          ? this.#all<AuditEventRecord>('SELECT * FROM audit_events ORDER BY id DESC LIMIT $limit', { limit: options.limit })
          : this.#all<AuditEventRecord>('SELECT * FROM audit_events WHERE id < $before ORDER BY id DESC LIMIT $limit', {
              limit: options.limit,
              before: options.before,
            });
      return rows.map(toAuditEvent);
    });
  }

  async exportData(): Promise<StoreData> {
    return this.#run(() => exportSqlite(this.#db));
  }

  async importData(data: StoreData): Promise<void> {
    this.#run(() => importSqlite(this.#db, data));
  }

  #appendAudit(event: NewAuditEvent): AuditEventRow {
    const row = this.#get<AuditEventRecord>(
      `INSERT INTO audit_events (at, action, actor_kind, actor_id, subject_id, client_address, detail)
       VALUES ($at, $action, $actor_kind, $actor_id, $subject_id, $client_address, $detail) RETURNING *`,
      auditParameters({ ...event, at: event.at ?? new Date() }),
    );
    if (!row) throw new Error('INSERT … RETURNING returned no row');
    return toAuditEvent(row);
  }

  #admin(sql: string, parameters: Parameters): AdminRow | null {
    const row = this.#get<AdminRecord>(sql, parameters);
    return row ? toAdmin(row) : null;
  }

  #apiKey(sql: string, parameters: Parameters): ApiKeyRow | null {
    const row = this.#get<ApiKeyRecord>(sql, parameters);
    return row ? toApiKey(row) : null;
  }

  #get<R>(sql: string, parameters: Parameters = {}): R | undefined {
    return this.#statement(sql).get(parameters) as R | undefined;
  }

  #all<R>(sql: string, parameters: Parameters = {}): R[] {
    return this.#statement(sql).all(parameters) as unknown as R[];
  }

  #statement(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  /** `fn` in one write transaction (with the change's audit event, when there is one). */
  #write<T>(fn: () => T): T {
    return this.#run(() => inTransaction(this.#db, fn));
  }

  #run<T>(fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      // The call answers 503 either way; the WAL's space back may let the next one through.
      if (isFullVolume(error)) reclaimWal(this.#db);
      throw unavailableOr(error);
    }
  }
}
