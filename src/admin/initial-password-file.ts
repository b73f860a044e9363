import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';

export const INITIAL_PASSWORD_FILE = 'initial-admin-password';

/** What `retire` did: the file held that admin's old password and is gone, there was none, or it holds another's. */
export type Retired = 'removed' | 'absent' | 'kept';

/**
 * `DATA_DIR/initial-admin-password`: the generated password of the first admin, for the
 * operator to read once (docs/deploying.md, "The first admin"), instead of a log line that
 * would keep it in every log store. The file lives as long as that password does.
 */
export class InitialPasswordFile {
  readonly path: string;
  readonly #dir: string;
  readonly #onError: (error: unknown) => void;

  constructor(dataDir: string, onError: (error: unknown) => void = () => {}) {
    this.#dir = resolve(dataDir);
    this.path = join(this.#dir, INITIAL_PASSWORD_FILE);
    this.#onError = onError;
  }

  /**
   * Written under a temporary name, created `0600` with O_EXCL, then renamed over any earlier
   * file: the password is never in a file someone else can read, not even for a moment, and a
   * reader never sees half of it.
   */
  async write(password: string): Promise<void> {
    await mkdir(this.#dir, { recursive: true, mode: 0o700 });
    const temporary = join(this.#dir, `.${INITIAL_PASSWORD_FILE}.${randomBytes(6).toString('hex')}`);
    const handle = await open(temporary, 'wx', 0o600);
    try {
      // The umask can only take bits away from 0600; set it exactly, whatever the umask.
      await handle.chmod(0o600);
      await handle.writeFile(`${password}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, this.path).catch(async (error: unknown) => {
      await unlink(temporary).catch(() => {});
      throw error;
    });
  }

  /**
   * After an admin's password changed: removes the file when the password it holds was theirs
   * (`wasTheirs`), so it goes at that admin's first change and never at another admin's. Never
   * throws: the change is made already, and a file gone before is nothing to report.
   */
  async retire(wasTheirs: (filed: string) => boolean | Promise<boolean>): Promise<Retired> {
    try {
      const filed = (await readFile(this.path, 'utf8')).replace(/\n$/, '');
      if (!(await wasTheirs(filed))) return 'kept';
      await unlink(this.path);
      return 'removed';
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'absent';
      this.#onError(error);
      return 'kept';
    }
  }
}

/** Whether two secrets are equal, in constant time whatever their lengths (compared as SHA-256 digests). */
export function sameSecret(a: string, b: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(a), digest(b));
}
