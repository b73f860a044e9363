import { cpSync, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { EMBEDDED_STORE_FILE, openEmbeddedSnapshot, openEmbeddedStore } from './embedded.ts';
import { holdsPgliteStore, lockPgliteStore, PGLITE_BACKUP_DIR, PgliteLockedError, PGLITE_DIR, UPGRADE_COMMAND } from './pglite-data-dir.ts';
import type { StoreData } from './store.ts';
import { syncPath } from './sync-path.ts';

/** Where the conversion works, inside DATA_DIR (the same filesystem, so the swap is a rename). */
const WORK_DIR = '.store-upgrade';

export type UpgradeResult =
  | { outcome: 'upgraded'; dir: string; backup: string; data: StoreData }
  | { outcome: 'current'; dir: string };

/** A DATA_DIR the upgrade will not touch, with the reason in one line. */
export class UpgradeRefusedError extends Error {
  readonly code: 'no_store' | 'mixed_store' | 'backup_exists' | 'store_in_use';
  constructor(code: UpgradeRefusedError['code'], message: string) {
    super(message);
    this.name = 'UpgradeRefusedError';
    this.code = code;
  }
}

/** Reads an 8.0 store into this build's rows; `readPgliteStore` with PGlite loaded. */
export type PgliteStoreReader = (pgliteDir: string) => Promise<StoreData>;

/**
 * Converts the 8.0 store (PGlite) in `dataDir` into this build's SQLite store in place
 * (docs/cli.md, "Upgrading an 8.0 store"). The new store is written beside the old one and
 * read back before anything moves; then it is renamed into place while `pglite/` is still
 * there (so a start in between refuses), and `pglite/` is renamed to PGLITE_BACKUP_DIR,
 * untouched: 8.0 can run on it again. Holds 8.0's lock throughout. A DATA_DIR that already
 * holds this build's store is `current`, left as it is. `force`: the operator knows no 8.0
 * gateway runs, so a lock left behind may be taken over (lockPgliteStore).
 */
export async function upgradeDataDir(dataDir: string, readStore: () => Promise<PgliteStoreReader>, force = false): Promise<UpgradeResult> {
  const dir = resolve(dataDir);
  const storeFile = join(dir, EMBEDDED_STORE_FILE);
  const backup = join(dir, PGLITE_BACKUP_DIR);
  if (!holdsPgliteStore(dir)) {
    if (existsSync(storeFile)) return { outcome: 'current', dir };
    throw new UpgradeRefusedError('no_store', `${dir} holds no Gatehouse 8.0 store (no ${join(dir, PGLITE_DIR)} directory): check DATA_DIR`);
  }
  if (existsSync(storeFile)) {
    // No gateway writes beside pglite/ (a start refuses), so this is an upgrade cut short
    // between its two renames, or a directory put together by hand: never overwritten.
    throw new UpgradeRefusedError(
      'mixed_store',
      `${dir} holds both an 8.0 store (${PGLITE_DIR}/) and ${EMBEDDED_STORE_FILE}: move ${storeFile} away, then run '${UPGRADE_COMMAND}' again`,
    );
  }
  if (existsSync(backup)) {
    throw new UpgradeRefusedError('backup_exists', `${backup} exists already (an earlier upgrade's backup?): move it away, then run '${UPGRADE_COMMAND}' again`);
  }
  // Before the lock: a missing optional dependency is refused with nothing touched.
  const read = await readStore();
  const release = lockOrRefuse(dir, force);
  const work = join(dir, WORK_DIR);
  try {
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { mode: 0o700 });
    const data = await convert(dir, work, read);
    swapIn(dir, join(work, 'store'), backup);
    return { outcome: 'upgraded', dir, backup, data };
  } finally {
    rmSync(work, { recursive: true, force: true });
    release();
  }
}

function lockOrRefuse(dir: string, force: boolean): () => void {
  try {
    return lockPgliteStore(dir, force);
  } catch (error) {
    if (error instanceof PgliteLockedError) throw new UpgradeRefusedError(error.code, error.message);
    throw error;
  }
}

/**
 * Reads a copy of the 8.0 files (the reader migrates what it reads), writes this build's store
 * in `work/store`, and reads it back: it must hold exactly what was read.
 */
async function convert(dir: string, work: string, read: PgliteStoreReader): Promise<StoreData> {
  const copy = join(work, PGLITE_DIR);
  cpSync(join(dir, PGLITE_DIR), copy, { recursive: true });
  const data = await read(copy);
  const target = join(work, 'store');
  const store = await openEmbeddedStore(target);
  try {
    await store.importData(data);
  } finally {
    await store.close();
  }
  const written = await openEmbeddedSnapshot(target);
  try {
    if (!isDeepStrictEqual(await written.exportData(), data)) throw new Error('the new store does not read back as the 8.0 store: nothing was changed in DATA_DIR');
  } finally {
    await written.close();
  }
  return data;
}

/** The new store into place, then the 8.0 files aside: each a rename, each made durable. */
function swapIn(dir: string, from: string, backup: string): void {
  // Closed, the store is one file; a WAL left behind must travel with it, and before it.
  const wal = `${EMBEDDED_STORE_FILE}-wal`;
  if (existsSync(join(from, wal))) renameSync(join(from, wal), join(dir, wal));
  renameSync(join(from, EMBEDDED_STORE_FILE), join(dir, EMBEDDED_STORE_FILE));
  syncPath(dir);
  renameSync(join(dir, PGLITE_DIR), backup);
  syncPath(dir);
}
