import { closeSync, openSync, rmSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

/** The lock's file in DATA_DIR: an empty SQLite database that nothing is ever written to. */
export const DATA_DIR_LOCK_FILE = 'gatehouse.lock';
/** The pid file earlier builds locked with; a leftover names a process that may be anyone now. */
const PID_LOCK_FILE = 'gatehouse.sqlite.lock';

/** SQLITE_BUSY: another connection holds the lock. SQLITE_NOTADB: the file holds something else. */
const SQLITE_BUSY = 5;
const SQLITE_NOTADB = 26;

/**
 * One process at a time on a DATA_DIR. SQLite's own locks would keep the store whole with two
 * processes on it, but a gateway on the embedded store has no revocation bus: a
 * `gatehouse keys revoke` beside it would store a revocation the gateway never hears of, and a
 * second gateway would be a replica nothing tells of changes (docs/adr/0029-data-dir-lock-and-store-files.md).
 *
 * The lock is an operating-system lock, so the kernel drops it when its process dies, however
 * it dies: SQLite's own, an fcntl() write lock taken by `BEGIN EXCLUSIVE` on `gatehouse.lock`
 * (exclusive locking mode, so it is never given back) and held until `release()`. A second
 * process's `BEGIN EXCLUSIVE` fails at once with SQLITE_BUSY; so does a second connection of
 * this process (SQLite tracks its locks per file within a process). Node has no flock(), and
 * this needs no dependency. The file is never removed: a process that found it gone would lock
 * a new file beside a holder of the old one. Nothing of this process may open and close that
 * file through `fs` while the lock is held: POSIX drops a process's fcntl locks on a file when
 * any of its descriptors on it is closed. Nor may the garbage collector close it (pinUntilReleased).
 *
 * Returns the release function.
 */
export function lockDataDir(dir: string): () => void {
  const path = join(dir, DATA_DIR_LOCK_FILE);
  // Created private before SQLite opens it (SQLite's own mode would be 0644).
  closeSync(openSync(path, 'a', 0o600));
  const db = holdLock(dir, path);
  // Held now, so the pid file of an earlier build is stale whatever pid it names.
  rmSync(join(dir, PID_LOCK_FILE), { force: true });
  const pin = pinUntilReleased(db);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    clearInterval(pin);
    db.close();
  };
}

/**
 * A `DatabaseSync` closes itself when it is garbage-collected, so a lock reachable only from
 * its store would end with no `release()` whenever the store became unreachable (a process
 * that keeps working without it, or a holder that only waits): a second gateway could then
 * start beside connections of this process not yet collected. An unref'd timer holds it (the
 * timer list keeps what it calls) without keeping the process alive: the lock ends at
 * `release()` or with the process, never earlier.
 */
function pinUntilReleased(db: DatabaseSync): NodeJS.Timeout {
  // The longest interval Node keeps as given (a longer one becomes 1 ms).
  return setInterval(() => db, 2 ** 31 - 1).unref();
}

/** `BEGIN EXCLUSIVE` on the lock's file, in exclusive locking mode: held until the connection closes. */
function holdLock(dir: string, path: string, emptied = false): DatabaseSync {
  const db = new DatabaseSync(path);
  try {
    db.exec('PRAGMA busy_timeout = 0');
    // No journal file beside it: the transaction writes nothing.
    db.exec('PRAGMA journal_mode = MEMORY');
    db.exec('PRAGMA locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    return db;
  } catch (error) {
    db.close();
    const errcode = (error as { errcode?: number }).errcode;
    // Not a database: no lock ever writes to it, so it is nobody's lock; emptied, it is one.
    if (errcode === SQLITE_NOTADB && !emptied) {
      truncateSync(path, 0);
      return holdLock(dir, path, true);
    }
    if (errcode === SQLITE_BUSY) {
      throw new Error(
        `${dir} is in use by another process (a running gateway, or a gatehouse command): stop it first, ` +
          'or share a PostgreSQL database (DATABASE_URL)',
        { cause: error },
      );
    }
    throw new Error(`cannot lock ${path}: ${(error as Error).message}`, { cause: error });
  }
}
