import { assertCurrentSchema, migrate } from './migrate.ts';
import { PostgresStore } from './postgres-store.ts';
import { recordPostgresWriter } from './postgres-written-by.ts';
import type { Store } from './store.ts';
import { NewerStoreError } from './written-by.ts';
import { VERSION } from '../version.ts';

export const DEFAULT_POOL_SIZE = 10;

export interface OpenStoreOptions {
  /** `postgres://…`; unset: the embedded store under `dataDir`. */
  databaseUrl?: string;
  dataDir: string;
  poolSize?: number;
  /**
   * Only to be read (`gatehouse store copy`'s source): the embedded store is opened without its
   * lock or a migration, so a running gateway's store can be read beside it.
   */
  readOnly?: boolean;
  /** The embedded store's warnings at open (a DATA_DIR found open to others): one line each. */
  warn?: (message: string) => void;
}

/**
 * Opens PostgreSQL or the embedded store (SQLite) and brings its schema up to date (or, only
 * to be read, checks it is this build's). Each
 * driver is loaded only when chosen: `pg` is a package a gateway on the embedded store would
 * carry for nothing, and `node:sqlite` likewise for one on PostgreSQL.
 */
export async function openStore(options: OpenStoreOptions): Promise<Store> {
  if (!options.databaseUrl) {
    const embedded = await import('./embedded.ts');
    return options.readOnly === true ? embedded.openEmbeddedSnapshot(options.dataDir) : embedded.openEmbeddedStore(options.dataDir, { warn: options.warn });
  }
  const db = await (await import('./postgres.ts')).connectPostgres(options.databaseUrl, options.poolSize ?? DEFAULT_POOL_SIZE);
  try {
    // Only to be read: a source at another schema is refused, never migrated under its gateways.
    // The record checked before migrating too: a newer release's store is refused naming both.
    await recordPostgresWriter(db, VERSION, false);
    if (options.readOnly === true) await assertCurrentSchema(db);
    else await migrate(db);
    await recordPostgresWriter(db, VERSION, options.readOnly !== true);
  } catch (error) {
    await db.close().catch(() => {});
    if (error instanceof NewerStoreError) throw error;
    throw new Error(`cannot ${options.readOnly === true ? 'read' : 'migrate'} the ${db.kind} store: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return new PostgresStore(db);
}
