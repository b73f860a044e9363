/**
 * The embedded store's schema, in SQLite's own SQL (docs/adr/0021-embedded-store-sqlite.md).
 * Its history is its own: PostgreSQL's migrations live in `../migrations/`, and a version here
 * says nothing about a version there. Never edit one that has shipped: add the next version.
 */
export interface SqliteMigration {
  version: number;
  name: string;
  sql: string;
}

/**
 * Timestamps are INTEGER milliseconds since the epoch: a JavaScript Date's own precision, and
 * compared as numbers. Ids are AUTOINCREMENT, so an id is never handed out twice (as
 * PostgreSQL's identity columns), and an imported id moves the sequence past it by itself.
 * STRICT: a value of the wrong type is an error, not a silent conversion. No lock row: a
 * create's transaction is BEGIN IMMEDIATE, and a connection runs one transaction at a time.
 */
const initial: SqliteMigration = {
  version: 1,
  name: 'initial',
  sql: `
CREATE TABLE admins (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  -- Stored lowercased by the store, so the unique constraint is case-insensitive.
  email TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE settings (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

CREATE TABLE api_keys (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  agent_id INTEGER,
  key_prefix TEXT NOT NULL UNIQUE,
  key_hash TEXT NOT NULL,
  -- A JSON array of strings.
  scopes TEXT NOT NULL CHECK (json_valid(scopes)),
  created_at INTEGER NOT NULL,
  last_used_at INTEGER,
  expires_at INTEGER,
  revoked_at INTEGER
) STRICT;

-- The rowid also serves "ORDER BY id DESC" (scanned backwards): no second index.
CREATE TABLE audit_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  action TEXT NOT NULL,
  actor_kind TEXT,
  actor_id TEXT,
  subject_id TEXT,
  client_address TEXT,
  -- A JSON object.
  detail TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail))
) STRICT;
`,
};

/**
 * The key lifecycle (docs/api-keys.md, "Key lifecycle"): enabled, a rate limit, the keys of a
 * rotation. `updated_at` starts as `created_at` for the keys already stored.
 */
const keyLifecycle: SqliteMigration = {
  version: 2,
  name: 'key-lifecycle',
  sql: `
ALTER TABLE api_keys ADD COLUMN enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1));
ALTER TABLE api_keys ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN rate_limit_requests INTEGER;
ALTER TABLE api_keys ADD COLUMN rate_limit_per_seconds INTEGER CHECK ((rate_limit_requests IS NULL) = (rate_limit_per_seconds IS NULL));
ALTER TABLE api_keys ADD COLUMN rotated_from INTEGER;
ALTER TABLE api_keys ADD COLUMN rotated_to INTEGER;
UPDATE api_keys SET updated_at = created_at;
`,
};

/** Admin sessions: one row per admin token issued (`id`: its `jti`), so that it can be listed and ended. */
const adminSessions: SqliteMigration = {
  version: 3,
  name: 'admin-sessions',
  sql: `
CREATE TABLE admin_sessions (
  id TEXT PRIMARY KEY,
  admin_id INTEGER NOT NULL REFERENCES admins (id),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  client_address TEXT,
  ended_at INTEGER
) STRICT;
CREATE INDEX admin_sessions_admin ON admin_sessions (admin_id);
`,
};

/**
 * One row: the newest Gatehouse release that has run on this file (src/store/written-by.ts).
 * Not a row of `settings`, which `store copy` moves and an import requires empty.
 */
const storeVersion: SqliteMigration = {
  version: 4,
  name: 'store-version',
  sql: `
CREATE TABLE store_version (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  written_by TEXT NOT NULL,
  written_at INTEGER NOT NULL
) STRICT;
`,
};

/** Every migration, in order. */
export const sqliteMigrations: readonly SqliteMigration[] = [initial, keyLifecycle, adminSessions, storeVersion];
