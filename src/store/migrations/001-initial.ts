import type { Migration } from './index.ts';

export const initial: Migration = {
  version: 1,
  name: 'initial',
  sql: `
CREATE TABLE admins (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- Stored lowercased by the store, so the unique constraint is case-insensitive.
  email text NOT NULL UNIQUE,
  password_hash text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE settings (
  name text PRIMARY KEY,
  value text NOT NULL
);

CREATE TABLE api_keys (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL,
  agent_id bigint,
  -- Named so the store can tell a prefix collision from any other failure.
  key_prefix text NOT NULL CONSTRAINT api_keys_key_prefix_key UNIQUE,
  key_hash text NOT NULL,
  scopes text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  expires_at timestamptz,
  revoked_at timestamptz
);

-- One row; createApiKey locks it FOR UPDATE so counting live keys and inserting are one
-- serial step, and concurrent creates can never pass the licence cap.
CREATE TABLE api_key_create_lock (
  id boolean PRIMARY KEY DEFAULT true CHECK (id)
);
INSERT INTO api_key_create_lock DEFAULT VALUES;

-- The primary key's index also serves "ORDER BY id DESC" (scanned backwards), so the
-- newest-first listing needs no second index.
CREATE TABLE audit_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  action text NOT NULL,
  actor_kind text,
  actor_id text,
  subject_id text,
  client_address text,
  detail jsonb NOT NULL DEFAULT '{}'
);
`,
};
