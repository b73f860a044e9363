import type { DatabaseSync } from 'node:sqlite';

/** SQLite's primary result codes for a full disk, a damaged file, and a file that is no database. */
const SQLITE_FULL = 13;
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/**
 * The WAL kept small, for small volumes (docs/adr/0029-data-dir-lock-and-store-files.md). The
 * WAL holds every commit until a checkpoint copies it into the file; SQLite checkpoints after
 * the commit that takes it past `wal_autocheckpoint` pages (128: 512 KiB at 4 KiB pages, not
 * the default 4 MB, which outgrew a 2 MB volume before its first checkpoint), and then reuses
 * it from the start, cut back to `journal_size_limit` bytes. So it stays under 512 KiB plus
 * the largest transaction (a `last_used_at` batch of 200 keys: at most ~800 KB).
 */
export const WAL_PRAGMAS = ['PRAGMA wal_autocheckpoint = 128', 'PRAGMA journal_size_limit = 524288'];

/** The low byte of an extended result code is its primary code. */
function primaryCode(error: unknown): number | undefined {
  const errcode = (error as { errcode?: unknown } | null)?.errcode;
  return typeof errcode === 'number' ? errcode & 0xff : undefined;
}

export function isFullVolume(error: unknown): boolean {
  return primaryCode(error) === SQLITE_FULL;
}

/** Whether SQLite found the file damaged or no database: a truncated store ends there. */
export function isDamagedFile(error: unknown): boolean {
  const code = primaryCode(error);
  return code === SQLITE_CORRUPT || code === SQLITE_NOTADB;
}

/**
 * Copies the whole WAL into the file and truncates it to 0 bytes (a TRUNCATE checkpoint), at
 * start and after a write failed on a full volume: the space the WAL held is the volume's
 * again. Fails quietly when it cannot (no room for the file to grow, a reader of an older
 * snapshot): nothing is lost, the next write or checkpoint tries again, so a volume that gets
 * space back serves changes again without a restart.
 */
export function reclaimWal(db: DatabaseSync): boolean {
  try {
    const row = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get();
    return Number(row?.busy ?? 1) === 0;
  } catch {
    return false;
  }
}
