import type { Migration } from './index.ts';

/**
 * The key lifecycle (docs/api-keys.md, "Key lifecycle"): a key can be disabled and enabled,
 * carries a rate limit, and knows the key it replaced by rotation and the one that replaced
 * it. `updated_at` starts as `created_at` for the keys already stored; its default lets a
 * replica of the previous version, still running during a rolling upgrade, create keys. The two key ids carry
 * no foreign key: `store copy` inserts keys in batches, and a key names one of a later batch.
 */
export const keyLifecycle: Migration = {
  version: 3,
  name: 'key-lifecycle',
  sql: `
ALTER TABLE api_keys
  ADD COLUMN enabled boolean NOT NULL DEFAULT true,
  ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now(),
  ADD COLUMN rate_limit_requests integer,
  ADD COLUMN rate_limit_per_seconds integer,
  ADD COLUMN rotated_from bigint,
  ADD COLUMN rotated_to bigint,
  ADD CONSTRAINT api_keys_rate_limit CHECK ((rate_limit_requests IS NULL) = (rate_limit_per_seconds IS NULL));
UPDATE api_keys SET updated_at = created_at;
`,
};
