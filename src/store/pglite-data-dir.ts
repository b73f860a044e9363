import { closeSync, existsSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A `DATA_DIR` written by Gatehouse 8.0.0 (docs/adr/0008-embedded-store-pglite.md): PGlite's
 * PostgreSQL files in `DATA_DIR/pglite`, and while a gateway runs on them a `DATA_DIR/pglite.lock`
 * holding its pid. That layout is frozen: 8.0.0 is released, and this module reads it as it is.
 */
export const PGLITE_DIR = 'pglite';
/** Where `gatehouse store upgrade` keeps the 8.0 files once converted: the operator deletes it. */
export const PGLITE_BACKUP_DIR = 'pglite-8.0-backup';
export const UPGRADE_COMMAND = 'gatehouse store upgrade';

/** Whether `dir` holds an 8.0 store: a non-empty `pglite/`. */
export function holdsPgliteStore(dir: string): boolean {
  const pglite = join(dir, PGLITE_DIR);
  return existsSync(pglite) && readdirSync(pglite).length > 0;
}

/** The one line a start on an 8.0 `DATA_DIR` fails with: what it is and the command that converts it. */
export function refusePgliteStore(dir: string): void {
  if (!holdsPgliteStore(dir)) return;
  throw new Error(
    `${dir} holds an embedded store from Gatehouse 8.0 (PGlite, in ${join(dir, PGLITE_DIR)}): ` +
      `run '${UPGRADE_COMMAND}' with the same DATA_DIR once, with the gateway stopped, to convert it (docs/deploying.md, "Upgrading")`,
  );
}

/** 8.0's lock is held, or may be: the one line says what to do, and `--force` is the way past a lock this command cannot judge. */
export class PgliteLockedError extends Error {
  readonly code = 'store_in_use';
  constructor(message: string) {
    super(message);
    this.name = 'PgliteLockedError';
  }
}

/**
 * Takes 8.0's lock on `dir`'s store as 8.0 itself does (a file created exclusively, holding
 * this pid), so that no 8.0 gateway runs on the files while they are read and moved, and none
 * starts meanwhile. Returns the release function. Its own code, not embedded-lock.ts's: that
 * lock is this release's and may change; this one must stay what 8.0.0 checks.
 *
 * A lock already there is never taken over on this command's judgement alone: run as
 * `docker run --rm … store upgrade`, the command is in a PID namespace of its own, where the
 * 8.0 gateway (in another container, often PID 1, as the command is) is invisible, so neither
 * "that pid is gone" (ESRCH) nor "that pid is mine" proves the gateway stopped. Only the
 * operator can say so (`force`). A holder visibly alive here is refused even then: that is a
 * process on this host, and removing the lock file by hand is the way past it.
 */
export function lockPgliteStore(dir: string, force = false): () => void {
  const path = join(dir, `${PGLITE_DIR}.lock`);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      try {
        writeSync(fd, `${process.pid}\n`);
      } finally {
        closeSync(fd);
      }
      return () => rmSync(path, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    refuseHeldLock(dir, path, readHolder(path), force);
    rmSync(path, { force: true });
  }
  throw new Error(`cannot lock ${dir} (${path})`);
}

/** Throws unless the lock at `path` may be taken over: only when the operator forces it, and its holder is not visibly alive. */
function refuseHeldLock(dir: string, path: string, holder: number, force: boolean): void {
  if (Number.isNaN(holder)) return; // Released meanwhile: the next attempt takes it.
  const pid = Number.isSafeInteger(holder) && holder > 0 ? holder : undefined;
  if (pid !== undefined && pid !== process.pid && processExists(pid)) {
    throw new PgliteLockedError(
      `${dir} is in use by process ${pid} (a Gatehouse 8.0 gateway?): stop it, then run '${UPGRADE_COMMAND}' again ` +
        `(if process ${pid} is no gateway, remove ${path} first)`,
    );
  }
  if (force) return;
  const who = pid === undefined ? 'an unreadable process id' : pid === process.pid ? `process ${pid}, this command's own pid here` : `process ${pid}, which this command cannot see`;
  throw new PgliteLockedError(
    `${dir} is locked by ${who} (${path}): a Gatehouse 8.0 gateway in another container or PID namespace, or one that stopped without unlocking; ` +
      `stop 8.0, and once you know it is stopped run '${UPGRADE_COMMAND} --force' (or remove ${path})`,
  );
}

function readHolder(path: string): number {
  try {
    const text = readFileSync(path, 'utf8').trim();
    // Not a pid (empty, written halfway, hand-made): a holder this command cannot judge.
    return /^\d+$/.test(text) ? Number(text) : -1;
  } catch {
    // Released meanwhile: NaN, and the next attempt takes it.
    return Number.NaN;
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
