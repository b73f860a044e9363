import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { lockDataDir } from './data-dir-lock.ts';
import { tightenDataDir } from './data-dir-permissions.ts';
import { refusePgliteStore } from './pglite-data-dir.ts';
import { migrateSqlite, schemaIsCurrent } from './sqlite/migrate.ts';
import { isDamagedFile, reclaimWal, WAL_PRAGMAS } from './sqlite/wal.ts';
import { recordSqliteWriter } from './sqlite/written-by.ts';
import { SqliteStore } from './sqlite-store.ts';
import { assertStoreFileWhole, createStoreFile, verifyStoreFile } from './store-file.ts';
import type { Store } from './store.ts';
import { NewerStoreError } from './written-by.ts';
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
  ...WAL_PRAGMAS,
];

export interface EmbeddedOptions {
  /** Where the one warning line of a DATA_DIR found open to others goes (the log, the CLI's stderr). */
  warn?: (message: string) => void;
}

export interface EmbeddedDatabase {
  db: DatabaseSync;
  /** Releases the lock: call it once `db` is closed. */
  release(): void;
}

/** Opens the embedded store in `dataDir` and brings its schema up to date. */
export async function openEmbeddedStore(dataDir: string, options: EmbeddedOptions = {}): Promise<Store> {
  const { db, release } = openEmbeddedDatabase(dataDir, options);
  try {
    // Checked before migrating too: a newer release's schema is refused naming both releases.
    recordSqliteWriter(db, VERSION, false);
    migrateSqlite(db);
    recordSqliteWriter(db, VERSION);
  } catch (error) {
    db.close();
    release();
    if (error instanceof NewerStoreError) throw error;
    throw (
      damaged(join(resolve(dataDir), EMBEDDED_STORE_FILE), error) ??
      new Error(`cannot migrate the embedded store: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
    );
  }
  // A WAL left by a crash is folded into the file now, and its space given back.
  reclaimWal(db);
  return new SqliteStore(db, release);
}

/** SQLite's own finding of a damaged or cut file (a truncation its header could not show), in one line naming it. */
function damaged(file: string, error: unknown): Error | undefined {
  if (!isDamagedFile(error)) return undefined;
  // One line: quick_check's findings come several to a message.
  const said = (error instanceof Error ? error.message : String(error)).replace(/\s+/g, ' ').trim();
  return new Error(`${file} is damaged or truncated (SQLite: ${said}): restore it from a backup, or move it away to start a new, empty store`, { cause: error });
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
  assertStoreFileWhole(file);
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
 * `dataDir/gatehouse.sqlite`, with DATA_DIR locked to this process (src/store/data-dir-lock.ts)
 * and private to its owner, in WAL mode with the settings above. Refuses a DATA_DIR that holds
 * a store of another format, and a store file that is not whole (src/store/store-file.ts),
 * rather than starting an empty store in its place.
 */
export function openEmbeddedDatabase(dataDir: string, options: EmbeddedOptions = {}): EmbeddedDatabase {
  const dir = resolve(dataDir);
  // The store holds the JWT signing secret and every hash: only its owner may read it. A new
  // directory and file are made private; SQLite gives the WAL and its index the file's mode.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  refuseForeignStore(dir);
  const file = join(dir, EMBEDDED_STORE_FILE);
  const release = lockDataDir(dir);
  let db: DatabaseSync | undefined;
  try {
    const warning = tightenDataDir(dir);
    if (warning !== undefined) options.warn?.(warning);
    const state = assertStoreFileWhole(file);
    if (!existsSync(file)) createStoreFile(file);
    db = new DatabaseSync(file);
    for (const pragma of PRAGMAS) db.exec(pragma);
    if (state === 'verify') verifyStoreFile(db);
    const mode = db.prepare('PRAGMA journal_mode').get()?.journal_mode;
    if (mode !== 'wal') throw new Error(`${file}: SQLite cannot use WAL here (journal_mode stays ${String(mode)}): put DATA_DIR on a local filesystem`);
  } catch (error) {
    db?.close();
    release();
    throw damaged(file, error) ?? error;
  }
  return { db, release };
}

/**
 * An 8.0 store (src/store/pglite-data-dir.ts): opening beside it would start an empty store and
 * hide every key and admin it holds. (A file that is not SQLite is store-file.ts's to refuse.)
 */
function refuseForeignStore(dir: string): void {
  refusePgliteStore(dir);
}
