/**
 * Persistence behind one interface, with two implementations sharing one schema and one
 * set of migrations: PostgreSQL (`DATABASE_URL`) and PGlite (embedded, `DATA_DIR`).
 * The store knows nothing of HTTP; it speaks rows and plain values.
 */
export interface ApiKeyRow {
  id: number;
  name: string;
  agentId: number | null;
  keyPrefix: string;
  keyHash: string;
  scopes: string[];
  createdAt: Date;
  lastUsedAt: Date | null;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

export interface NewApiKey {
  name: string;
  agentId: number | null;
  keyPrefix: string;
  keyHash: string;
  scopes: string[];
  expiresAt: Date | null;
}

export interface AdminRow {
  id: number;
  email: string;
  passwordHash: string;
  createdAt: Date;
}

export interface AuditEventRow {
  id: number;
  at: Date;
  action: string;
  actorKind: string | null;
  actorId: string | null;
  subjectId: string | null;
  clientAddress: string | null;
  detail: Record<string, unknown>;
}

export type NewAuditEvent = Omit<AuditEventRow, 'id' | 'at'> & { at?: Date };

export type CreateKeyResult =
  | { ok: true; key: ApiKeyRow }
  | { ok: false; reason: 'license_limit' | 'prefix_taken' };

export interface Store {
  readonly kind: 'postgres' | 'embedded';
  /** Cheap round trip, for readiness. Rejects when the database cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;

  countAdmins(): Promise<number>;
  findAdminByEmail(email: string): Promise<AdminRow | null>;
  findAdminById(id: number): Promise<AdminRow | null>;
  listAdmins(): Promise<AdminRow[]>;
  /** Inserts unless the email exists (case-insensitively); returns the stored admin and whether it was created. */
  createAdmin(email: string, passwordHash: string): Promise<{ admin: AdminRow; created: boolean }>;
  setAdminPassword(id: number, passwordHash: string): Promise<void>;
  /**
   * Replaces the admin's hash only while it is still `expected` (a rehash of the same password
   * with new argon2id settings must never undo a password change); true when replaced.
   */
  replaceAdminPasswordHash(id: number, expected: string, passwordHash: string): Promise<boolean>;

  /** Returns the stored value of a setting, storing `candidate` first if there is none. Race-free across replicas. */
  getOrCreateSetting(name: string, candidate: string): Promise<string>;

  /**
   * Creates a key in one transaction that serialises creates, so the licence cap holds under
   * concurrency: keys neither revoked nor expired at `now` count towards `limit` (null: no cap).
   */
  createApiKey(input: NewApiKey, limit: number | null, now: Date): Promise<CreateKeyResult>;
  listApiKeys(): Promise<ApiKeyRow[]>;
  findApiKeyById(id: number): Promise<ApiKeyRow | null>;
  findApiKeyByPrefix(prefix: string): Promise<ApiKeyRow | null>;
  /** Sets `revoked_at` once (idempotent); returns the row, or null for an unknown id. */
  revokeApiKey(id: number, now: Date): Promise<ApiKeyRow | null>;
  /** Write-behind of `last_used_at`: one statement for the batch, never moving a timestamp backwards. */
  recordKeyUses(uses: ReadonlyMap<number, Date>): Promise<void>;
  /** Counts of keys by status at `now`. */
  countKeysByStatus(now: Date): Promise<{ active: number; expired: number; revoked: number }>;

  appendAuditEvent(event: NewAuditEvent): Promise<AuditEventRow>;
  /** Newest first; `before` is an id for paging. */
  listAuditEvents(options: { limit: number; before?: number }): Promise<AuditEventRow[]>;
}
