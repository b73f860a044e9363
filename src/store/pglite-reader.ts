import type { PGlite, Transaction } from '@electric-sql/pglite';
import { migrate } from './migrate.ts';
import { PostgresStore } from './postgres-store.ts';
import type { SqlExecutor, SqlSession } from './sql.ts';
import type { StoreData } from './store.ts';

/**
 * The one module that loads PGlite, and only `gatehouse store upgrade` imports it (dynamically):
 * a gateway never carries PGlite's ~55 MB (docs/adr/0008-embedded-store-pglite.md), and
 * `test/e2e/store-drivers.test.ts` fails if one loads it.
 */
export const PGLITE_PACKAGE = '@electric-sql/pglite';
/** The release Gatehouse 8.0.0 wrote its stores with: the one that reads them as written. */
export const PGLITE_VERSION = '0.5.16';

/** The optional dependency is not installed (`npm ci --omit=optional`, or an image without it). */
export class PgliteMissingError extends Error {
  constructor() {
    super(`reading an 8.0 store needs the optional package ${PGLITE_PACKAGE}: install it with 'npm install --no-save ${PGLITE_PACKAGE}@${PGLITE_VERSION}' and run the command again`);
    this.name = 'PgliteMissingError';
  }
}

/** `specifier`: the package, unless a test names one that is not installed. */
export async function loadPglite(specifier: string = PGLITE_PACKAGE): Promise<typeof PGlite> {
  try {
    return ((await import(specifier)) as { PGlite: typeof PGlite }).PGlite;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') throw new PgliteMissingError();
    throw error;
  }
}

/**
 * Everything an 8.0 store in `pgliteDir` holds, as this build's rows. It is PostgreSQL at
 * 8.0's schema: this build's PostgreSQL migrations bring it to the current one (new columns
 * with their defaults: every key enabled, no rate limit, no rotation; an empty sessions table,
 * 8.0 stored none), and PostgresStore reads it as it reads any PostgreSQL store. So `pgliteDir`
 * must be a copy: the migrations write to it, and the original stays as 8.0 left it.
 */
export async function readPgliteStore(pgliteDir: string, PGliteClass: typeof PGlite): Promise<StoreData> {
  // As 8.0 opened it (shared_buffers=8MB); ids are int8, numbers as PostgresStore expects.
  const db = await PGliteClass.create(pgliteDir, {
    startParams: [...PGliteClass.defaultStartParams, '-c', 'shared_buffers=8MB'],
    parsers: { 20: (value: string) => Number(value) },
  });
  const executor: SqlExecutor = {
    kind: 'postgres',
    ...session(db),
    transaction: (fn) => db.transaction((tx) => fn(session(tx))),
    close: () => db.close(),
  };
  try {
    const [table] = await executor.query<{ present: boolean }>(`SELECT to_regclass('schema_migrations') IS NOT NULL AS present`);
    if (table?.present !== true) throw new Error(`${pgliteDir} is a PGlite database that holds no Gatehouse store`);
    await migrate(executor);
    return await new PostgresStore(executor).exportData();
  } finally {
    await db.close();
  }
}

function session(on: PGlite | Transaction): SqlSession {
  return {
    async query<R>(text: string, params: readonly unknown[] = []) {
      return (await on.query<R>(text, [...params])).rows;
    },
    async exec(script) {
      await on.exec(script);
    },
  };
}
