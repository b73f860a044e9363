import type { Argon2Hasher } from '../crypto/argon2.ts';
import { GatewayError } from '../http/errors.ts';
import type { FailureLimiter } from '../limits/failure-limiter.ts';
import type { Store } from '../store/store.ts';
import type { IssuedSession, SessionTokens } from './sessions.ts';

export const LOGIN_FAILURE_LIMIT = 10;
export const LOGIN_FAILURE_WINDOW_MS = 15 * 60 * 1000;

export type LoginOutcome = { ok: true; adminId: number; session: IssuedSession } | { ok: false; adminId: number | null };

/**
 * Admin login. A wrong email and a wrong password cost the same argon2id verify and get
 * the same refusal, so neither the answer nor its timing tells which one was wrong.
 */
export class LoginService {
  readonly #store: Store;
  readonly #hasher: Argon2Hasher;
  readonly #sessions: SessionTokens;
  readonly #limiter: FailureLimiter;
  readonly #decoyHash: Promise<string>;

  constructor(deps: { store: Store; hasher: Argon2Hasher; sessions: SessionTokens; limiter: FailureLimiter }) {
    this.#store = deps.store;
    this.#hasher = deps.hasher;
    this.#sessions = deps.sessions;
    this.#limiter = deps.limiter;
    this.#decoyHash = deps.hasher.hash('decoy password for unknown emails');
  }

  /** Throws 429 `rate_limited` when the email or the address is throttled; otherwise says whether it matched. */
  async login(email: string, password: string, clientAddress: string): Promise<LoginOutcome> {
    const subjects = [`email:${email.toLowerCase()}`, `addr:${clientAddress}`];
    const waits = await Promise.all(subjects.map((subject) => this.#limiter.blockedFor(subject)));
    const retryAfter = Math.max(...waits);
    if (retryAfter > 0) {
      throw new GatewayError('rate_limited', 'Too many failed logins; try again later', { retryAfter });
    }
    const admin = await this.#store.findAdminByEmail(email);
    const matches = await this.#hasher.verify(admin?.passwordHash ?? (await this.#decoyHash), password);
    if (!admin || !matches) {
      await Promise.all(subjects.map((subject) => this.#limiter.recordFailure(subject)));
      return { ok: false, adminId: admin?.id ?? null };
    }
    await this.#limiter.reset(subjects[0]!);
    return { ok: true, adminId: admin.id, session: await this.#sessions.issue(admin.id) };
  }
}
