import type { Migration } from './index.ts';

/**
 * Admin sessions (docs/api-keys.md, "Admin sessions"): one row per admin token issued, so that
 * an admin can list and end them, and a replica that starts knows which tokens were ended.
 * `id` is the token's `jti`. Rows past `expires_at` are of no use and are deleted as logins run.
 */
export const adminSessions: Migration = {
  version: 4,
  name: 'admin-sessions',
  sql: `
CREATE TABLE admin_sessions (
  id text PRIMARY KEY,
  admin_id integer NOT NULL REFERENCES admins (id),
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  client_address text,
  ended_at timestamptz
);
CREATE INDEX admin_sessions_admin ON admin_sessions (admin_id);
`,
};
