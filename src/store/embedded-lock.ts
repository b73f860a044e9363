import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';

/**
 * One process at a time on an embedded store. SQLite's own locks would keep the file whole
 * with two processes on it, but a gateway on the embedded store has no revocation bus: a
 * `gatehouse keys revoke` beside it would store a revocation the gateway never hears of, and
 * a second gateway on the same file would be a replica that nothing tells of changes. The lock
 * makes that a refusal. It is a file holding the owner's pid, taken with O_EXCL; a lock whose
 * process is gone (a crash, a container restart) is taken over. Returns the release function.
 */
export function lockEmbeddedStore(store: string): () => void {
  const path = `${store}.lock`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx');
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
    // Our own pid: a restarted container (pid 1 again) or this process opening it twice.
    if (holder !== undefined && holder !== process.pid && isAlive(holder)) {
      throw new Error(
        `the embedded store ${store} is in use by process ${holder} (a running gateway?): stop it first, ` +
          `or share a PostgreSQL database (DATABASE_URL)`,
      );
    }
    rmSync(path, { force: true });
  }
  throw new Error(`cannot lock the embedded store ${store} (${path})`);
}

function readHolder(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
