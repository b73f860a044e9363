import { chmodSync, lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const PRIVATE_DIR = 0o700;
const PRIVATE_FILE = 0o600;

/**
 * Makes DATA_DIR readable by its owner alone: the directory `0700`, every file directly in it
 * `0600` (the store, its `-wal` and `-shm`, the lock, and whatever else the gateway keeps
 * there). The store holds the JWT signing secret and every hash; a directory restored from a
 * backup as `0644` would otherwise stay world-readable. Only permission bits are taken away,
 * never added (a `0400` file stays `0400`); symbolic links and subdirectories are left alone.
 *
 * A directory or file of another user (chmod's EPERM) is left as it is and named.
 *
 * Returns the one warning line naming what was looser, or undefined when nothing was.
 */
export function tightenDataDir(dir: string): string | undefined {
  const loosened: string[] = [];
  // Another user's (a volume's root owned by root, a file copied in by root): left as it is,
  // and said, rather than refusing to start.
  const notOurs: string[] = [];
  const tighten = (path: string, name: string, allowed: number) => {
    const mode = lstatSync(path).mode & 0o777;
    if ((mode & ~allowed) === 0) return;
    try {
      chmodSync(path, mode & allowed);
      loosened.push(`${name} (was ${octal(mode)})`);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EPERM') throw error;
      notOurs.push(`${name} (${octal(mode)})`);
    }
  };
  tighten(dir, 'the directory', PRIVATE_DIR);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isFile()) tighten(join(dir, entry.name), entry.name, PRIVATE_FILE);
  }
  if (loosened.length === 0 && notOurs.length === 0) return undefined;
  const parts = [
    ...(loosened.length > 0 ? [`now private to its owner (directory 0700, files 0600): ${loosened.join(', ')}`] : []),
    ...(notOurs.length > 0 ? [`not this user's to change, left open: ${notOurs.join(', ')}`] : []),
  ];
  return `DATA_DIR: ${dir} was open to other users, ${parts.join('; ')}`;
}

function octal(mode: number): string {
  return `0${mode.toString(8).padStart(3, '0')}`;
}
