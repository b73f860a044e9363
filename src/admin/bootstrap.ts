import { randomBytes } from 'node:crypto';
import type { Argon2Hasher } from '../crypto/argon2.ts';
import type { Store } from '../store/store.ts';

export const DEFAULT_ADMIN_EMAIL = 'admin@gatehouse.local';

export interface BootstrapOutput {
  info(message: string): void;
  warn(message: string): void;
  /** Shown once on the console, never sent to the log: it carries a generated password. */
  announce(lines: string[]): void;
}

/**
 * Makes sure an admin can log in after start. `ADMIN_EMAIL`/`ADMIN_PASSWORD` create that
 * admin if missing and never overwrite an existing one's password. With no admin at all and
 * none configured, one is created and its generated password shown once (as Grafana and
 * Argo CD do), so `npm start` alone is usable.
 */
export async function ensureAdmin(
  store: Store,
  hasher: Argon2Hasher,
  configured: { email?: string; password?: string },
  out: BootstrapOutput,
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
    const password = configured.password ?? generatePassword();
    const { admin, created } = await store.createAdmin(configured.email, await hasher.hash(password));
    if (!created) return;
    if (configured.password) out.info(`created admin ${admin.email} from ADMIN_EMAIL/ADMIN_PASSWORD`);
    else announcePassword(out, admin.email, password);
    return;
  }
  if ((await store.countAdmins()) > 0) return;
  const password = generatePassword();
  const { admin, created } = await store.createAdmin(DEFAULT_ADMIN_EMAIL, await hasher.hash(password));
  if (created) announcePassword(out, admin.email, password);
}

function announcePassword(out: BootstrapOutput, email: string, password: string): void {
  out.announce([
    '',
    '  Gatehouse created an admin account. This password is shown only once:',
    '',
    `    email:    ${email}`,
    `    password: ${password}`,
    '',
    '  Log in with: POST /api/v1/auth/login {"email": "...", "password": "..."}',
    '',
  ]);
}

function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}
