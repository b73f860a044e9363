import { migrate } from './migrate.ts';
import { PostgresStore } from './postgres-store.ts';
import type { Store } from './store.ts';

export const DEFAULT_POOL_SIZE = 10;

export interface OpenStoreOptions {
  /** `postgres://…`; unset: the embedded store under `dataDir`. */
  databaseUrl?: string;
  dataDir: string;
  poolSize?: number;
}

/**
 * Opens PostgreSQL or the embedded store (SQLite) and brings its schema up to date. Each
 * driver is loaded only when chosen: `pg` is a package a gateway on the embedded store would
 * carry for nothing, and `node:sqlite` likewise for one on PostgreSQL.
 */
export async function openStore(options: OpenStoreOptions): Promise<Store> {
  if (!options.databaseUrl) return (await import('./embedded.ts')).openEmbeddedStore(options.dataDir);
  const db = await (await import('./postgres.ts')).connectPostgres(options.databaseUrl, options.poolSize ?? DEFAULT_POOL_SIZE);
  try {
    await migrate(db);
  } catch (error) {
    await db.close().catch(() => {});
    throw new Error(`cannot migrate the ${db.kind} store: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return new PostgresStore(db);
}
