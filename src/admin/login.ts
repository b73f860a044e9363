import { randomBytes } from 'node:crypto';
import { ARGON2_BUSY, type Argon2Busy, type Argon2Hasher } from '../crypto/argon2.ts';
import { needsRehash, sameArgon2Params, type Argon2Params } from '../crypto/argon2-params.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { FailureLimiter } from '../limits/failure-limiter.ts';
import type { AdminRow, Store } from '../store/store.ts';
import { decoyParams } from './decoy.ts';
import type { SessionService } from './session-service.ts';
import type { IssuedSession } from './sessions.ts';

export const LOGIN_FAILURE_LIMIT = 10;
export const LOGIN_FAILURE_WINDOW_MS = 15 * 60 * 1000;
/**
 * How long the decoy's parameters are trusted before the admin hashes are read again: another
 * replica may have upgraded admins meanwhile. The re-read runs behind the login that noticed.
 */
export const DECOY_REFRESH_MS = 10 * 60 * 1000;

export type LoginOutcome = { ok: true; adminId: number; session: IssuedSession } | { ok: false; adminId: number | null };

export interface LoginServiceDeps {
  store: Pick<Store, 'findAdminByEmail' | 'findAdminById' | 'listAdmins' | 'replaceAdminPasswordHash'>;
  hasher: Pick<Argon2Hasher, 'verifyLogin' | 'hashLogin' | 'params' | 'loginLaneHasRoom'>;
  /** Opens the session of a successful login: its token, stored as a session. */
  sessions: Pick<SessionService, 'open'>;
  limiter: FailureLimiter;
  /** Told of a failed hash upgrade or decoy refresh; the login itself is unaffected. */
  onError?: (error: unknown) => void;
  now?: () => number;
}

/** A password checked: the admin it was checked against (none: an unknown email, checked against the decoy). */
interface Checked {
  admin: AdminRow | null;
  matches: boolean;
}

interface Decoy {
  hash: string;
  params: Argon2Params;
  madeAt: number;
}

/**
 * Admin login. A wrong email and a wrong password cost the same argon2id verify and get
 * the same refusal, so neither the answer nor its timing tells which one was wrong.
 *
 * Throttling reserves the attempt before any work: each attempt counts as a failure for its
 * email and its client address first, and is given back only if it succeeds or is never
 * checked. A burst cannot all pass a check made before any of them failed, so at most
 * LOGIN_FAILURE_LIMIT failed logins per email and per address are ever argon2-verified in a window.
 */
export class LoginService {
  readonly #store: LoginServiceDeps['store'];
  readonly #hasher: LoginServiceDeps['hasher'];
  readonly #sessions: LoginServiceDeps['sessions'];
  readonly #limiter: FailureLimiter;
  readonly #onError: (error: unknown) => void;
  readonly #now: () => number;
  /** Random per process: the decoy is never meant to match anything. */
  readonly #decoySecret = randomBytes(32).toString('base64url');
  #decoy: Decoy | undefined;
  #makingDecoy: Promise<Decoy | undefined> | undefined;

  constructor(deps: LoginServiceDeps) {
    this.#store = deps.store;
    this.#hasher = deps.hasher;
    this.#sessions = deps.sessions;
    this.#limiter = deps.limiter;
    this.#onError = deps.onError ?? (() => {});
    this.#now = deps.now ?? Date.now;
    // Made ahead, so the first unknown email does not pay for it (and so look slower than a real one).
    void this.#remakeDecoy();
  }

  /** Throws 429 `rate_limited` when the email or the address is throttled; otherwise says whether it matched. */
  async login(email: string, password: string, clientAddress: string): Promise<LoginOutcome> {
    const checked = await this.#attempt(`email:${email.toLowerCase()}`, clientAddress, () => this.#check(email, password));
    const { admin, matches } = checked;
    if (!admin || !matches) return { ok: false, adminId: admin?.id ?? null };
    const hash = await this.#upgradeHash(admin, password);
    // Refused when the password changed since it was checked (a change or a reset racing this login).
    const session = await this.#sessions.open(admin.id, clientAddress, hash);
    return session === undefined ? { ok: false, adminId: admin.id } : { ok: true, adminId: admin.id, session };
  }

  /**
   * Whether `password` is the admin's, checked as a login is (docs/api-keys.md, "Admin
   * sessions"): the same throttling by email and address, the same argon2id lane, a failure
   * counted like a failed login. Throws 429 `rate_limited` as a login does.
   */
  async verifyPassword(adminId: number, password: string, clientAddress: string): Promise<boolean> {
    const admin = await this.#store.findAdminById(adminId);
    if (!admin) return false;
    const checked = await this.#attempt(`email:${admin.email.toLowerCase()}`, clientAddress, async () => {
      if (!this.#hasher.loginLaneHasRoom()) return ARGON2_BUSY;
      const matches = await this.#hasher.verifyLogin(admin.passwordHash, password);
      return matches === ARGON2_BUSY ? ARGON2_BUSY : { admin, matches };
    });
    return checked.matches;
  }

  /**
   * One password check, throttled: the attempt is reserved as a failure for the email and the
   * address before any work, and given back only if it matches or is never checked (argon2id
   * busy, a failure). So a burst cannot all pass a check made before any of them failed.
   */
  async #attempt(email: string, clientAddress: string, check: () => Promise<Checked | Argon2Busy>): Promise<Checked> {
    const subjects = [email, `addr:${clientAddress}`];
    const retryAfter = await this.#limiter.reserve(subjects);
    if (retryAfter > 0) throw new GatewayError('rate_limited', 'Too many failed logins; try again later', { retryAfter });
    let checked: Checked | Argon2Busy;
    try {
      checked = await check();
    } catch (error) {
      await this.#release(subjects);
      throw error;
    }
    if (checked === ARGON2_BUSY) {
      await this.#release(subjects);
      throw new GatewayError('rate_limited', 'Too many logins are being checked; try again shortly', { retryAfter: 1 });
    }
    // A failure keeps its reservation: that is the failure counted.
    if (checked.admin && checked.matches) await this.#release(subjects);
    return checked;
  }

  async #check(email: string, password: string): Promise<Checked | Argon2Busy> {
    if (!this.#hasher.loginLaneHasRoom()) return ARGON2_BUSY;
    const admin = await this.#store.findAdminByEmail(email);
    const encoded = admin?.passwordHash ?? (await this.#decoyHash());
    if (encoded === ARGON2_BUSY) return ARGON2_BUSY;
    const matches = await this.#hasher.verifyLogin(encoded, password);
    if (matches === ARGON2_BUSY) return ARGON2_BUSY;
    return { admin, matches };
  }

  #release(subjects: readonly string[]): Promise<unknown> {
    return Promise.all(subjects.map((subject) => this.#limiter.release(subject)));
  }

  /**
   * After a settings change, rehashes the password the admin just proved with the current
   * ARGON2_* settings. Compare-and-set on the old hash: a password changed meanwhile is never
   * overwritten with the old one. Busy or failing, it is simply tried at the next login.
   */
  /** The hash stored for the admin afterwards: the upgraded one when it replaced the one checked. */
  async #upgradeHash(admin: AdminRow, password: string): Promise<string> {
    if (!needsRehash(admin.passwordHash, this.#hasher.params)) return admin.passwordHash;
    try {
      const upgraded = await this.#hasher.hashLogin(password);
      if (upgraded === ARGON2_BUSY) return admin.passwordHash;
      if (await this.#store.replaceAdminPasswordHash(admin.id, admin.passwordHash, upgraded)) {
        // The stored hashes moved: the decoy follows them (after any refresh already under way),
        // before this login's token: once per admin after a settings change, and the next unknown
        // email is then sure to cost what the upgraded hashes cost.
        await this.#makingDecoy;
        await this.#remakeDecoy();
        return upgraded;
      }
    } catch (error) {
      this.#onError(error);
    }
    return admin.passwordHash;
  }

  async #decoyHash(): Promise<string | Argon2Busy> {
    const decoy = this.#decoy;
    if (decoy === undefined) return (await this.#remakeDecoy())?.hash ?? ARGON2_BUSY;
    if (this.#now() - decoy.madeAt >= DECOY_REFRESH_MS) void this.#remakeDecoy();
    return decoy.hash;
  }

  /** One refresh at a time; resolves with the decoy in use afterwards (undefined if none could be made yet). */
  #remakeDecoy(): Promise<Decoy | undefined> {
    this.#makingDecoy ??= this.#makeDecoy().finally(() => (this.#makingDecoy = undefined));
    return this.#makingDecoy;
  }

  async #makeDecoy(): Promise<Decoy | undefined> {
    try {
      const admins = await this.#store.listAdmins();
      const params = decoyParams(
        admins.map((admin) => admin.passwordHash),
        this.#hasher.params,
      );
      const madeAt = this.#now();
      if (this.#decoy !== undefined && sameArgon2Params(this.#decoy.params, params)) {
        this.#decoy = { ...this.#decoy, madeAt };
        return this.#decoy;
      }
      const hash = await this.#hasher.hashLogin(this.#decoySecret, params);
      if (hash !== ARGON2_BUSY) this.#decoy = { hash, params, madeAt };
    } catch (error) {
      this.#onError(error);
    }
    return this.#decoy;
  }
}
