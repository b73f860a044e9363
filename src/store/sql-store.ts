import type { SqlExecutor } from './sql.ts';
import type {
  AdminRow,
  ApiKeyRow,
  AuditEventRow,
  CreateKeyResult,
  NewApiKey,
  NewAuditEvent,
  Store,
} from './store.ts';

/** The one implementation of `Store`: the same SQL on PostgreSQL and on PGlite. */
export class SqlStore implements Store {
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

  async createAdmin(email: string, passwordHash: string): Promise<{ admin: AdminRow; created: boolean }> {
    const inserted = await this.#db.query<AdminRecord>(
      'INSERT INTO admins (email, password_hash) VALUES ($1, $2) ON CONFLICT (email) DO NOTHING RETURNING *',
      [normaliseEmail(email), passwordHash],
    );
    if (inserted[0]) return { admin: toAdmin(inserted[0]), created: true };
    const existing = await this.findAdminByEmail(email);
    if (!existing) throw new Error('admin vanished between insert and select');
    return { admin: existing, created: false };
  }

  async setAdminPassword(id: number, passwordHash: string): Promise<void> {
    await this.#db.query('UPDATE admins SET password_hash = $2 WHERE id = $1', [id, passwordHash]);
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

  async createApiKey(input: NewApiKey, limit: number | null, now: Date): Promise<CreateKeyResult> {
    try {
      return await this.#db.transaction(async (tx): Promise<CreateKeyResult> => {
        // Held until COMMIT: the next create counts only after our insert is visible.
        await tx.query('SELECT id FROM api_key_create_lock FOR UPDATE');
        if (limit !== null) {
          const [row] = await tx.query<{ count: number }>(
            `SELECT count(*)::int AS count FROM api_keys
             WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)`,
            [now],
          );
          if ((row?.count ?? 0) >= limit) return { ok: false, reason: 'license_limit' };
        }
        const [row] = await tx.query<ApiKeyRecord>(
          `INSERT INTO api_keys (name, agent_id, key_prefix, key_hash, scopes, created_at, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
          [input.name, input.agentId, input.keyPrefix, input.keyHash, input.scopes, now, input.expiresAt],
        );
        if (!row) throw new Error('INSERT … RETURNING returned no row');
        return { ok: true, key: toApiKey(row) };
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

  async revokeApiKey(id: number, now: Date): Promise<ApiKeyRow | null> {
    const rows = await this.#db.query<ApiKeyRecord>(
      'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING *',
      [id, now],
    );
    return rows[0] ? toApiKey(rows[0]) : null;
  }

  async recordKeyUses(uses: ReadonlyMap<number, Date>): Promise<void> {
    if (uses.size === 0) return;
    // Timestamps as ISO strings: both drivers serialise a string array the same way.
    await this.#db.query(
      `UPDATE api_keys AS k SET last_used_at = v.t
       FROM unnest($1::bigint[], $2::timestamptz[]) AS v(id, t)
       WHERE k.id = v.id AND (k.last_used_at IS NULL OR k.last_used_at < v.t)`,
      [[...uses.keys()], [...uses.values()].map((at) => at.toISOString())],
    );
  }

  async countKeysByStatus(now: Date): Promise<{ active: number; expired: number; revoked: number }> {
    const [row] = await this.#db.query<{ active: number; expired: number; revoked: number }>(
      `SELECT
         count(*) FILTER (WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1))::int AS active,
         count(*) FILTER (WHERE revoked_at IS NULL AND expires_at <= $1)::int AS expired,
         count(*) FILTER (WHERE revoked_at IS NOT NULL)::int AS revoked
       FROM api_keys`,
      [now],
    );
    return row ?? { active: 0, expired: 0, revoked: 0 };
  }

  async appendAuditEvent(event: NewAuditEvent): Promise<AuditEventRow> {
    const [row] = await this.#db.query<AuditEventRecord>(
      `INSERT INTO audit_events (at, action, actor_kind, actor_id, subject_id, client_address, detail)
       VALUES (COALESCE($1::timestamptz, now()), $2, $3, $4, $5, $6, $7::jsonb) RETURNING *`,
      [
        event.at ?? null,
        event.action,
        event.actorKind,
        event.actorId,
        event.subjectId,
        event.clientAddress,
        JSON.stringify(event.detail),
      ],
    );
    if (!row) throw new Error('INSERT … RETURNING returned no row');
    return toAuditEvent(row);
  }

  async listAuditEvents(options: { limit: number; before?: number }): Promise<AuditEventRow[]> {
    const rows = await this.#db.query<AuditEventRecord>(
      'SELECT * FROM audit_events WHERE ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $1',
      [options.limit, options.before ?? null],
    );
    return rows.map(toAuditEvent);
  }
}

interface AdminRecord {
  id: number;
  email: string;
  password_hash: string;
  created_at: Date;
}

interface ApiKeyRecord {
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
}

interface AuditEventRecord {
  id: number;
  at: Date;
  action: string;
  actor_kind: string | null;
  actor_id: string | null;
  subject_id: string | null;
  client_address: string | null;
  detail: Record<string, unknown>;
}

/** Lowercased in JS, not SQL: PostgreSQL's lower() depends on the server's locale. */
function normaliseEmail(email: string): string {
  return email.toLowerCase();
}

function isPrefixConflict(error: unknown): boolean {
  // 23505 unique_violation; both drivers surface the server's error fields.
  const fields = error as { code?: unknown; constraint?: unknown } | null;
  return fields?.code === '23505' && fields.constraint === 'api_keys_key_prefix_key';
}

function toAdmin(row: AdminRecord): AdminRow {
  return { id: row.id, email: row.email, passwordHash: row.password_hash, createdAt: row.created_at };
}

function toApiKey(row: ApiKeyRecord): ApiKeyRow {
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
  };
}

function toAuditEvent(row: AuditEventRecord): AuditEventRow {
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
