import { join } from 'node:path';
import { migrate } from './migrate.ts';
import { SqlStore } from './sql-store.ts';
import type { Store } from './store.ts';

export const DEFAULT_POOL_SIZE = 10;

export interface OpenStoreOptions {
  /** `postgres://…`; unset: the embedded store under `dataDir`. */
  databaseUrl?: string;
  dataDir: string;
  poolSize?: number;
}

/**
 * Opens PostgreSQL or the embedded store and brings its schema up to date. Each driver is
 * loaded only when chosen: PGlite's module alone holds ~7 MB of a process's memory, which a
 * gateway on PostgreSQL would carry for nothing (and `pg` likewise for an embedded one).
 */
export async function openStore(options: OpenStoreOptions): Promise<Store> {
  const db = options.databaseUrl
    ? await (await import('./postgres.ts')).connectPostgres(options.databaseUrl, options.poolSize ?? DEFAULT_POOL_SIZE)
    : await (await import('./embedded.ts')).openEmbedded(join(options.dataDir, 'pglite'));
  try {
    await migrate(db);
  } catch (error) {
    await db.close().catch(() => {});
    throw new Error(`cannot migrate the ${db.kind} store: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return new SqlStore(db);
}
