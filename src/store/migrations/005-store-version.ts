import type { Migration } from './index.ts';

/**
 * One row: the newest Gatehouse release that has run on this store (src/store/written-by.ts).
 * Its own table, not a row of `settings`: `settings` is data that `store copy` moves and that
 * an import requires empty, while this says who wrote the store itself.
 */
export const storeVersion: Migration = {
  version: 5,
  name: 'store-version',
  sql: `
CREATE TABLE store_version (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  written_by text NOT NULL,
  written_at timestamptz NOT NULL DEFAULT now()
);
`,
};
