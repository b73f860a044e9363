import type { DatabaseSync } from 'node:sqlite';
import { StoreUnavailableError } from '../unavailable.ts';

/**
 * `fn` between BEGIN IMMEDIATE and COMMIT, rolled back if it throws. IMMEDIATE takes the write
 * lock at BEGIN, so a transaction that reads and then writes (the licence cap) never finds
 * its snapshot stale. `fn` is synchronous: node:sqlite runs on this thread, so nothing else
 * of this process runs until COMMIT, and concurrent calls are serialised by construction.
 */
export function inTransaction<T>(db: DatabaseSync, fn: () => T): T {
  return between(db, 'BEGIN IMMEDIATE', fn);
}

/** `fn` in one read transaction: every statement in it sees the same snapshot. */
export function inReadTransaction<T>(db: DatabaseSync, fn: () => T): T {
  return between(db, 'BEGIN', fn);
}

function between<T>(db: DatabaseSync, begin: string, fn: () => T): T {
  db.exec(begin);
  try {
    const result = fn();
    // An awaited body would commit before its work is done and let other calls in between.
    if (typeof (result as { then?: unknown } | null)?.then === 'function') throw new Error('an SQLite transaction body must be synchronous');
    db.exec('COMMIT');
    return result;
  } catch (error) {
    try {
      db.exec('ROLLBACK');
    } catch {
      // Already rolled back by SQLite itself (some I/O and full-disk errors do).
    }
    throw error;
  }
}

/**
 * SQLite's primary result codes that mean "the database cannot serve now" rather than "this
 * statement is wrong": busy or locked by another connection (an outside tool), out of memory,
 * an I/O error, a full disk, a file that cannot be opened. Mapped here, where the codes are
 * known, so `guardStore` passes a StoreUnavailableError on and HTTP answers 503.
 */
const UNAVAILABLE_CODES: readonly number[] = [5, 6, 7, 10, 13, 14];

export function unavailableOr(error: unknown): unknown {
  const errcode = (error as { errcode?: unknown } | null)?.errcode;
  // The low byte of an extended result code is its primary code.
  if (typeof errcode === 'number' && UNAVAILABLE_CODES.includes(errcode & 0xff)) return new StoreUnavailableError(error);
  return error;
}
