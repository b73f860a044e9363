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

/**
 * Takes 8.0's lock on `dir`'s store as 8.0 itself does (a file created exclusively, holding
 * this pid; a lock whose process is gone is taken over), so that no 8.0 gateway runs on the
 * files while they are read and moved, and none starts meanwhile. Refuses while one runs.
 * Returns the release function. Its own code, not embedded-lock.ts's: that lock is this
 * release's and may change; this one must stay what 8.0.0 checks.
 */
export function lockPgliteStore(dir: string): () => void {
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
    const holder = readHolder(path);
    if (Number.isSafeInteger(holder) && holder > 0 && holder !== process.pid && processExists(holder)) {
      throw new Error(`${dir} is in use by process ${holder} (a Gatehouse 8.0 gateway?): stop it, then run '${UPGRADE_COMMAND}' again`);
    }
    rmSync(path, { force: true });
  }
  throw new Error(`cannot lock ${dir} (${path})`);
}

function readHolder(path: string): number {
  try {
    return Number(readFileSync(path, 'utf8').trim());
  } catch {
    // Released meanwhile: the next attempt takes it.
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
