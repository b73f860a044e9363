/**
 * Persistence behind one interface, with two implementations:
 * PostgreSQL (`DATABASE_URL`, `postgres-store.ts`) and SQLite (embedded in `DATA_DIR`,
 * `sqlite-store.ts`), each with its own SQL and migrations and one contract test for both.
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
  /** false: disabled, refused until enabled again (docs/api-keys.md, "Key lifecycle"). */
  enabled: boolean;
  /** The last change through update or rotation (`createdAt` until then). */
  updatedAt: Date;
  /** The key's own rate limit (docs/api-keys.md, "Rate limits"); null: none. */
  rateLimit: RateLimit | null;
  /** The key this one replaced by rotation. */
  rotatedFrom: number | null;
  /** The key that replaced this one: it is in its grace period until `expiresAt`, and counts towards no licence. */
  rotatedTo: number | null;
}

export interface RateLimit {
  requests: number;
  perSeconds: number;
}

export interface NewApiKey {
  name: string;
  agentId: number | null;
  keyPrefix: string;
  keyHash: string;
  scopes: string[];
  expiresAt: Date | null;
  /** Default true. */
  enabled?: boolean;
  /** Default none. */
  rateLimit?: RateLimit | null;
}

/** What an update may change; a field left out stays as it is. */
export interface ApiKeyPatch {
  name?: string;
  scopes?: string[];
  agentId?: number | null;
  expiresAt?: Date | null;
  enabled?: boolean;
  rateLimit?: RateLimit | null;
}

export type UpdateKeyResult =
  | { ok: true; key: ApiKeyRow; before: ApiKeyRow }
  | { ok: false; reason: 'not_found' | 'revoked' | 'license_limit' | 'rotated' };

export type RotateKeyResult =
  | { ok: true; key: ApiKeyRow; old: ApiKeyRow; /** Keys revoked by the rotation: the old one (no grace), a predecessor still in its grace period. */ revoked: number[] }
  | { ok: false; reason: 'not_found' | 'revoked' | 'expired' | 'rotated' | 'prefix_taken' };

/** The events of an update, from the row before and after it (none when nothing changed). */
export type AuditOfUpdate = (before: ApiKeyRow, after: ApiKeyRow) => NewAuditEvent[];

export interface AdminRow {
  id: number;
  email: string;
  passwordHash: string;
  createdAt: Date;
}

/** An admin token issued at login (`id`: its `jti`), until it expires or is ended. */
export interface AdminSessionRow {
  id: string;
  adminId: number;
  createdAt: Date;
  expiresAt: Date;
  clientAddress: string | null;
  endedAt: Date | null;
}

/** Which of an admin's sessions to end: one (`id`), or all of them but one (`exceptId`) or all. */
export interface SessionMatch {
  adminId: number;
  id?: string;
  exceptId?: string;
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

/**
 * The audit event of a change, made from the row the change wrote (its id is known only then):
 * written in the same transaction as the change, so the change is never kept without its event.
 */
export type AuditOf<T> = (row: T) => NewAuditEvent;

/** Everything a store holds, for `gatehouse store copy`: ids, hashes and timestamps as stored. */
export interface StoreData {
  admins: AdminRow[];
  apiKeys: ApiKeyRow[];
  auditEvents: AuditEventRow[];
  settings: Array<{ name: string; value: string }>;
  /** Ended ones too: a token ended on one store stays ended on the other. */
  adminSessions: AdminSessionRow[];
}

/** The tables `importData` requires empty, with the noun that counts their rows. */
export const STORED_TABLES = [
  ['admins', 'admin'],
  ['api_keys', 'API key'],
  ['audit_events', 'audit event'],
  ['settings', 'setting'],
  ['admin_sessions', 'admin session'],
] as const;

/** What a store holds, in words ("1 admin, 3 API keys"), or null when it holds nothing. */
export function describeHoldings(count: (table: (typeof STORED_TABLES)[number][0]) => number): string | null {
  const held = STORED_TABLES.flatMap(([table, noun]) => {
    const rows = count(table);
    return rows === 0 ? [] : [`${rows} ${noun}${rows === 1 ? '' : 's'}`];
  });
  return held.length === 0 ? null : held.join(', ');
}

/** `importData` into a store that already holds data: nothing was written. */
export class StoreNotEmptyError extends Error {
  constructor(what: string) {
    super(`the target store is not empty (it holds ${what})`);
    this.name = 'StoreNotEmptyError';
  }
}

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
  /**
   * Inserts unless the email exists (case-insensitively); returns the stored admin and whether it
   * was created. `audit`: the event of a creation, written in the same transaction.
   */
  createAdmin(email: string, passwordHash: string, audit?: AuditOf<AdminRow>): Promise<{ admin: AdminRow; created: boolean }>;
  /** `audit`: written in the same transaction, when the admin exists. */
  setAdminPassword(id: number, passwordHash: string, audit?: AuditOf<AdminRow>): Promise<void>;
  /**
   * Replaces the admin's hash only while it is still `expected` (a rehash of the same password
   * with new argon2id settings must never undo a password change); true when replaced.
   */
  replaceAdminPasswordHash(id: number, expected: string, passwordHash: string): Promise<boolean>;

  /** Returns the stored value of a setting, storing `candidate` first if there is none. Race-free across replicas. */
  getOrCreateSetting(name: string, candidate: string): Promise<string>;

  /**
   * Creates a key in one transaction that serialises creates, so the licence cap holds under
   * concurrency: keys neither revoked, expired nor rotated (in a grace period) at `now` count
   * towards `limit` (null: no cap), disabled ones included.
   * `audit`: the creation's event, written in the same transaction.
   */
  createApiKey(input: NewApiKey, limit: number | null, now: Date, audit?: AuditOf<ApiKeyRow>): Promise<CreateKeyResult>;
  listApiKeys(): Promise<ApiKeyRow[]>;
  findApiKeyById(id: number): Promise<ApiKeyRow | null>;
  findApiKeyByPrefix(prefix: string): Promise<ApiKeyRow | null>;
  /**
   * Sets `revoked_at` once (idempotent); returns the row, or null for an unknown id. `audit`: the
   * revocation's event (every call that finds the key), written in the same transaction.
   */
  revokeApiKey(id: number, now: Date, audit?: AuditOf<ApiKeyRow>): Promise<ApiKeyRow | null>;
  /** Write-behind of `last_used_at`: one statement for the batch, never moving a timestamp backwards. */
  recordKeyUses(uses: ReadonlyMap<number, Date>): Promise<void>;
  /**
   * Applies `patch` in one transaction that locks the key (concurrent updates apply one after
   * the other, never mixed), with its events. Never touches `revoked_at`: a revoked key is
   * refused, and stays revoked. Enabling a key is refused while the keys counted towards
   * `limit` without it already reach it (creates are serialised with it). A rotated key's
   * expiry can only be brought forward (its grace period never grows into a licence-free key).
   */
  updateApiKey(id: number, patch: ApiKeyPatch, options: { now: Date; limit: number | null; audit?: AuditOfUpdate }): Promise<UpdateKeyResult>;
  /**
   * Replaces key `id` by a new one in one transaction: the new key copies name, agent, scopes,
   * expiry, enabled and rate limit, with `rotatedFrom`; the old one gets `rotatedTo` and an
   * expiry of at most `now + graceMs` (revoked at once when `graceMs` is 0). A predecessor of the
   * old key still in its grace period is revoked, so a chain never has three live keys.
   * `audit`: the rotation's event, written in the same transaction.
   */
  rotateApiKey(
    id: number,
    next: { keyPrefix: string; keyHash: string },
    options: { now: Date; graceMs: number; audit?: (old: ApiKeyRow, next: ApiKeyRow, revoked: readonly number[]) => NewAuditEvent },
  ): Promise<RotateKeyResult>;
  /** Counts of keys by status at `now` (a disabled key that is neither revoked nor expired is `disabled`). */
  countKeysByStatus(now: Date): Promise<{ active: number; disabled: number; expired: number; revoked: number }>;

  /**
   * Records a session as issued (or, with `endedAt`, as already ended); an id stored before is
   * left as it is. With `passwordHash`, only while the admin's hash is still that one (false
   * otherwise). Deletes sessions expired a day ago.
   */
  createAdminSession(session: AdminSessionRow, passwordHash?: string): Promise<boolean>;
  /** The admin's sessions neither expired nor ended at `now`, oldest first. */
  listAdminSessions(adminId: number, now: Date): Promise<AdminSessionRow[]>;
  findAdminSession(id: string): Promise<AdminSessionRow | null>;
  /** Ends the matching sessions not yet ended and not expired, with an event each in the same transaction; returns them. */
  endAdminSessions(match: SessionMatch, now: Date, audit?: AuditOf<AdminSessionRow>): Promise<AdminSessionRow[]>;
  /** Sessions ended and not yet expired at `now`: what a starting replica must refuse. */
  listEndedAdminSessions(now: Date): Promise<Array<{ id: string; adminId: number; expiresAt: Date }>>;

  appendAuditEvent(event: NewAuditEvent): Promise<AuditEventRow>;
  /** Newest first; `before` is an id for paging. */
  listAuditEvents(options: { limit: number; before?: number }): Promise<AuditEventRow[]>;

  /** Everything the store holds, read in one transaction. */
  exportData(): Promise<StoreData>;
  /**
   * Writes `data` into this store, ids kept, in one transaction (so a failure leaves it as it
   * was), and moves its id sequences past them. Rejects with `StoreNotEmptyError` when the store
   * holds any admin, key, audit event or setting.
   */
  importData(data: StoreData): Promise<void>;
}
