import { join } from 'node:path';
import { openEmbedded } from './embedded.ts';
import { migrate } from './migrate.ts';
import { connectPostgres } from './postgres.ts';
import { SqlStore } from './sql-store.ts';
import type { Store } from './store.ts';

export const DEFAULT_POOL_SIZE = 10;

export interface OpenStoreOptions {
  /** `postgres://…`; unset: the embedded store under `dataDir`. */
  databaseUrl?: string;
  dataDir: string;
  poolSize?: number;
}

/** Opens PostgreSQL or the embedded store and brings its schema up to date. */
export async function openStore(options: OpenStoreOptions): Promise<Store> {
  const db = options.databaseUrl
    ? await connectPostgres(options.databaseUrl, options.poolSize ?? DEFAULT_POOL_SIZE)
    : await openEmbedded(join(options.dataDir, 'pglite'));
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
