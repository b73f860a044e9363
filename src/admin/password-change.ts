import type { Argon2Hasher } from '../crypto/argon2.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { Actor } from '../keys/key-service.ts';
import type { AdminPrincipal } from '../policy/principal.ts';
import type { Store } from '../store/store.ts';
import { sameSecret, type InitialPasswordFile } from './initial-password-file.ts';
import type { LoginService } from './login.ts';
import { newPasswordProblem } from './password-rules.ts';
import type { SessionService } from './session-service.ts';

interface PasswordChangeDeps {
  login: Pick<LoginService, 'verifyPassword'>;
  hasher: Pick<Argon2Hasher, 'hash'>;
  store: Pick<Store, 'setAdminPassword'>;
  sessions: Pick<SessionService, 'endAll'>;
  /** Removed when the password it holds is the one just changed. */
  initialPassword: Pick<InitialPasswordFile, 'retire'>;
  now: () => Date;
}

export { MIN_PASSWORD_LENGTH } from './password-rules.ts';

/**
 * An admin changes their own password (`POST /api/v1/auth/password`): the current one proven as
 * a login proves it (and throttled with logins), the new one stored, and every other session of
 * that admin ended on every replica before the answer; the session that made the change stays.
 * The first admin's generated password file goes with the password it holds.
 */
export class PasswordChange {
  readonly #deps: PasswordChangeDeps;

  constructor(deps: PasswordChangeDeps) {
    this.#deps = deps;
  }

  async change(principal: AdminPrincipal, current: string, next: string, actor: Actor): Promise<void> {
    const problems: Array<{ field: string; message: string }> = [];
    const rule = newPasswordProblem(next);
    if (rule !== undefined) problems.push({ field: 'new_password', message: rule });
    if (next === current) problems.push({ field: 'new_password', message: 'must differ from the current password' });
    if (problems.length > 0) throw new GatewayError('validation_failed', problems.map((problem) => `${problem.field}: ${problem.message}`).join('; '), { errors: problems });
    if (!(await this.#deps.login.verifyPassword(principal.adminId, current, actor.address ?? 'unknown'))) {
      throw new GatewayError('invalid_credential', 'The current password is not right');
    }
    const { store, hasher, sessions, initialPassword, now } = this.#deps;
    const at = now();
    await store.setAdminPassword(principal.adminId, await hasher.hash(next), (admin) => ({
      action: 'password_changed',
      actorKind: actor.kind,
      actorId: actor.id,
      subjectId: String(admin.id),
      clientAddress: actor.address,
      detail: {},
      at,
    }));
    // The generated password stops working here: its file goes before anything else can fail.
    await initialPassword.retire((filed) => sameSecret(filed, current));
    await sessions.endAll(principal.adminId, actor, principal.sessionId);
  }
}
