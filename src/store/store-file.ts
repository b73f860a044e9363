import { closeSync, existsSync, openSync, readSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { syncPath } from './sync-path.ts';

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');
/** The database header's length (https://www.sqlite.org/fileformat.html#the_database_header). */
const HEADER_BYTES = 100;
/** SQLITE_CORRUPT, as SQLite itself reports a damaged file. */
const SQLITE_CORRUPT = 11;
const RESTORE = 'restore it from a backup, or move it away to start a new, empty store';

/** A file that looks whole, or one to be read through once open (`PRAGMA quick_check`) before it is used. */
export type StoreFileState = 'whole' | 'verify';

/**
 * What is wrong with a store file, from its first 100 bytes and its size; 'whole' when nothing
 * is, 'verify' when only reading it through can tell. Every file SQLite has written holds at
 * least one page, whole pages, and a header that names the page size and (when the change
 * counter at 24 equals the one at 92) how many pages the file holds. While a non-empty WAL is
 * beside it the file may be shorter than its header says and still whole (a checkpoint cut
 * short by a crash copies page 1 first, and the WAL still holds every page it was copying), or
 * it may be cut: then it is read through.
 */
export function inspectStoreFile(header: Buffer, size: number, walBytes: number): string | StoreFileState {
  if (size === 0) return `is empty (0 bytes), which no store SQLite has written is: ${RESTORE}`;
  // A file cut inside the magic string itself is still one SQLite wrote, cut short.
  const magic = Math.min(header.length, SQLITE_HEADER.length);
  if (!header.subarray(0, magic).equals(SQLITE_HEADER.subarray(0, magic))) {
    return 'is not an SQLite database: move it away to start empty, or point DATA_DIR at the right directory';
  }
  if (size < HEADER_BYTES) return `is truncated (${size} bytes, shorter than its header): ${RESTORE}`;
  const declared = header.readUInt16BE(16);
  const pageSize = declared === 1 ? 65_536 : declared;
  if (pageSize < 512 || pageSize > 65_536 || (pageSize & (pageSize - 1)) !== 0) {
    return `is not an SQLite database (its header names a page size of ${declared}): ${RESTORE}`;
  }
  if (size % pageSize !== 0) return `is truncated (${size} bytes, not a whole number of ${pageSize}-byte pages): ${RESTORE}`;
  const pages = header.readUInt32BE(28);
  const pagesValid = pages > 0 && header.readUInt32BE(24) === header.readUInt32BE(92);
  if (!pagesValid || size >= pages * pageSize) return 'whole';
  return walBytes > 0 ? 'verify' : `is truncated (${size} bytes, its header says ${pages * pageSize}): ${RESTORE}`;
}

/**
 * Refuses a store file that is not whole, in one line naming it: never opened, so SQLite never
 * treats an empty or cut file as a new database. A missing file with its WAL still there is
 * refused too: a new store would take that WAL for its own. Returns 'verify' when the file is
 * to be read through once open (inspectStoreFile).
 */
export function assertStoreFileWhole(file: string): StoreFileState {
  const walBytes = sizeOf(`${file}-wal`);
  if (!existsSync(file)) {
    if (walBytes !== undefined) throw new Error(`${file} is missing but its ${file}-wal is there: restore the store file, or move the -wal away to start a new, empty store`);
    return 'whole';
  }
  const header = Buffer.alloc(HEADER_BYTES);
  const fd = openSync(file, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, HEADER_BYTES, 0);
  } finally {
    closeSync(fd);
  }
  const state = inspectStoreFile(header.subarray(0, read), statSync(file).size, walBytes ?? 0);
  if (state !== 'whole' && state !== 'verify') throw new Error(`${file} ${state}`);
  return state;
}

/** Reads an open store through; throws SQLite's first finding when it is not whole. */
export function verifyStoreFile(db: DatabaseSync): void {
  const finding = String(Object.values(db.prepare('PRAGMA quick_check(1)').get() ?? {})[0] ?? 'no answer');
  if (finding !== 'ok') throw Object.assign(new Error(finding), { errcode: SQLITE_CORRUPT });
}

/**
 * A new store file, whole from the first moment it has its name: initialised in WAL mode under
 * another name, synced, then renamed. A crash before the rename leaves no `gatehouse.sqlite`
 * (the next start begins again); none after it leaves an empty one, which would be refused.
 */
export function createStoreFile(file: string): void {
  const partial = `${file}.new`;
  for (const leftover of ['', '-wal', '-shm', '-journal']) rmSync(`${partial}${leftover}`, { force: true });
  closeSync(openSync(partial, 'wx', 0o600));
  const db = new DatabaseSync(partial);
  try {
    db.exec('PRAGMA journal_mode = WAL');
  } finally {
    db.close();
  }
  syncPath(partial);
  renameSync(partial, file);
  syncPath(dirname(file));
}

function sizeOf(path: string): number | undefined {
  try {
    return statSync(path).size;
  } catch {
    return undefined;
  }
}
