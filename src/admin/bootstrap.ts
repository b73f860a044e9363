import { randomBytes } from 'node:crypto';
import type { Argon2Hasher } from '../crypto/argon2.ts';
import type { Store } from '../store/store.ts';
import type { InitialPasswordFile } from './initial-password-file.ts';

export const DEFAULT_ADMIN_EMAIL = 'admin@gatehouse.local';

export interface BootstrapOutput {
  info(message: string): void;
  warn(message: string): void;
  /** Present only on an interactive terminal (stdin and stdout TTYs, src/admin/interactive-terminal.ts): never a log stream. */
  terminal?: (lines: string[]) => void;
}

/**
 * Makes sure an admin can log in after start. `ADMIN_EMAIL`/`ADMIN_PASSWORD` create that
 * admin if missing and never overwrite an existing one's password. With no admin at all and
 * none configured, one is created with a generated password (as Grafana and Argo CD do), so
 * `npm start` alone is usable: the password goes to `DATA_DIR/initial-admin-password`, which
 * the log line names, and to an interactive terminal if there is one, never into the log.
 */
export async function ensureAdmin(
  store: Store,
  hasher: Argon2Hasher,
  configured: { email?: string; password?: string },
  out: BootstrapOutput,
  file: InitialPasswordFile,
): Promise<void> {
  if (configured.email) {
    const existing = await store.findAdminByEmail(configured.email);
    if (existing) {
      if (configured.password && !(await hasher.verify(existing.passwordHash, configured.password))) {
        out.warn(
          `ADMIN_PASSWORD differs from the stored password of ${existing.email}; the stored one is kept ` +
            '(use `gatehouse admin reset-password` to change it)',
        );
      }
      return;
    }
    if (configured.password) {
      const { admin, created } = await store.createAdmin(configured.email, await hasher.hash(configured.password));
      if (created) out.info(`created admin ${admin.email} from ADMIN_EMAIL/ADMIN_PASSWORD`);
      return;
    }
    await createWithGeneratedPassword(store, hasher, configured.email, out, file);
    return;
  }
  if ((await store.countAdmins()) > 0) return;
  await createWithGeneratedPassword(store, hasher, DEFAULT_ADMIN_EMAIL, out, file);
}

/**
 * The file is written after the admin is created, by the one process whose insert created it
 * (replicas racing on one database: the others find it created and write nothing).
 */
async function createWithGeneratedPassword(store: Store, hasher: Argon2Hasher, email: string, out: BootstrapOutput, file: InitialPasswordFile): Promise<void> {
  const password = generatePassword();
  const { admin, created } = await store.createAdmin(email, await hasher.hash(password));
  if (!created) return;
  try {
    await file.write(password);
  } catch (error) {
    throw new Error(
      `cannot write the generated password of the new admin ${admin.email} to ${file.path} (${(error as Error).message}); ` +
        `set one with 'gatehouse admin reset-password --email ${admin.email}'`,
      { cause: error },
    );
  }
  out.info(
    `created admin ${admin.email} with a generated password, written to ${file.path} (readable by this user only); ` +
      'the file is removed at that admin\'s first password change',
  );
  out.terminal?.([
    '',
    '  Gatehouse created an admin account:',
    '',
    `    email:    ${admin.email}`,
    `    password: ${password}`,
    '',
    `  (also in ${file.path} until its first password change)`,
    '  Log in with: POST /api/v1/auth/login {"email": "...", "password": "..."}',
    '',
  ]);
}

function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}
