import { closeSync, existsSync, mkdirSync, openSync, readSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { lockEmbeddedStore } from './embedded-lock.ts';
import { refusePgliteStore } from './pglite-data-dir.ts';
import { migrateSqlite, schemaIsCurrent } from './sqlite/migrate.ts';
import { recordSqliteWriter } from './sqlite/written-by.ts';
import { SqliteStore } from './sqlite-store.ts';
import { NewerStoreError } from './written-by.ts';
import type { Store } from './store.ts';
import { VERSION } from '../version.ts';

/** The embedded store's one file in DATA_DIR (its WAL and lock sit beside it). */
export const EMBEDDED_STORE_FILE = 'gatehouse.sqlite';

/**
 * FULL: every commit is synced to disk before the answer leaves, so a created key, a
 * revocation or an admin change survives a power loss, not only a crash of the process (which
 * NORMAL already survives in WAL mode). These commits are rare; the frequent one, the
 * write-behind of `last_used_at`, opts out (SqliteStore.recordKeyUses).
 * busy_timeout: only an outside tool can hold the lock (the gateway is one process with one
 * connection), and a wait blocks this thread, so it is short: past it the call fails with 503.
 */
const PRAGMAS = [
  'PRAGMA journal_mode = WAL',
  'PRAGMA synchronous = FULL',
  'PRAGMA foreign_keys = ON',
  'PRAGMA busy_timeout = 1000',
  // The WAL is reused after each checkpoint (~4 MB); one large transaction (an import) would
  // otherwise leave it at its size until the store is closed.
  'PRAGMA journal_size_limit = 16777216',
];

export interface EmbeddedDatabase {
  db: DatabaseSync;
  /** Releases the lock: call it once `db` is closed. */
  release(): void;
}

/** Opens the embedded store in `dataDir` and brings its schema up to date. */
export async function openEmbeddedStore(dataDir: string): Promise<Store> {
  const { db, release } = openEmbeddedDatabase(dataDir);
  try {
    // Checked before migrating too: a newer release's schema is refused naming both releases.
    recordSqliteWriter(db, VERSION, false);
    migrateSqlite(db);
    recordSqliteWriter(db, VERSION);
  } catch (error) {
    db.close();
    release();
    if (error instanceof NewerStoreError) throw error;
    throw new Error(`cannot migrate the embedded store: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  return new SqliteStore(db, release);
}

/**
 * The embedded store in `dataDir` for reading alone (`gatehouse store copy`'s source): no lock
 * and no migration, so it can be read while its gateway runs. In WAL mode a reader sees one
 * consistent snapshot per transaction while the writer goes on; the store must already be at
 * this build's schema.
 */
export async function openEmbeddedSnapshot(dataDir: string): Promise<Store> {
  const dir = resolve(dataDir);
  refuseForeignStore(dir);
  const file = join(dir, EMBEDDED_STORE_FILE);
  if (!existsSync(file)) throw new Error(`${file} does not exist: there is no embedded store in ${dir}`);
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    db.exec('PRAGMA busy_timeout = 1000');
    if (!schemaIsCurrent(db)) throw new Error(`${file} is not at this build's schema: start this build's gateway on it once, then copy`);
    recordSqliteWriter(db, VERSION, false);
  } catch (error) {
    db.close();
    throw error;
  }
  return new SqliteStore(db);
}

/**
 * `dataDir/gatehouse.sqlite`, locked to this process (src/store/embedded-lock.ts), in WAL
 * mode with the settings above. Refuses a DATA_DIR that holds a store of another format
 * rather than starting an empty one beside it.
 */
export function openEmbeddedDatabase(dataDir: string): EmbeddedDatabase {
  const dir = resolve(dataDir);
  // The store holds the JWT signing secret and every hash: only its owner may read it. A new
  // directory and file are made private; SQLite gives the WAL and its index the file's mode.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  refuseForeignStore(dir);
  const file = join(dir, EMBEDDED_STORE_FILE);
  const release = lockEmbeddedStore(file);
  let db: DatabaseSync | undefined;
  try {
    if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
    db = new DatabaseSync(file);
    for (const pragma of PRAGMAS) db.exec(pragma);
    const mode = db.prepare('PRAGMA journal_mode').get()?.journal_mode;
    if (mode !== 'wal') throw new Error(`${file}: SQLite cannot use WAL here (journal_mode stays ${String(mode)}): put DATA_DIR on a local filesystem`);
  } catch (error) {
    db?.close();
    release();
    throw error;
  }
  return { db, release };
}

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * An 8.0 store (src/store/pglite-data-dir.ts), or a file that is not SQLite: opening beside
 * it would start an empty store and hide every key and admin it holds.
 */
function refuseForeignStore(dir: string): void {
  refusePgliteStore(dir);
  const file = join(dir, EMBEDDED_STORE_FILE);
  if (!existsSync(file)) return;
  const header = Buffer.alloc(SQLITE_HEADER.length);
  const fd = openSync(file, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  // An empty file is a database SQLite has not written yet.
  if (read > 0 && !header.equals(SQLITE_HEADER)) {
    throw new Error(`${file} is not an SQLite database: move it away to start empty, or point DATA_DIR at the right directory`);
  }
}
