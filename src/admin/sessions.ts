import { randomUUID } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import { LRUCache } from 'lru-cache';
import { GatewayError } from '../errors/gateway-error.ts';
import type { AdminPrincipal } from '../policy/principal.ts';

export const TOKEN_ISSUER = 'gatehouse';
export const TOKEN_AUDIENCE = 'gatehouse-admin';
const ALGORITHM = 'HS256';
/** Verified tokens remembered; admins are few, and a forgotten token is only verified again. */
const VERIFIED_TOKEN_CACHE_SIZE = 1024;

export interface IssuedSession {
  token: string;
  expiresAt: Date;
  expiresIn: number;
}

export type VerifiedSession = AdminPrincipal & { expiresAt: Date };

/**
 * Admin session tokens: HS256 JWTs with `iss`, `aud`, `sub`, `jti`, `iat` and `exp`.
 * A verified token is remembered until its `exp`: nothing else about it can change (sessions
 * are not revoked before they expire), so checking the clock against `exp` is all a repeated
 * verification would do, without the HMAC and the parsing.
 */
export class SessionTokens {
  readonly #secret: Uint8Array;
  readonly #ttlSeconds: number;
  readonly #now: () => Date;
  readonly #verified = new LRUCache<string, VerifiedSession>({ max: VERIFIED_TOKEN_CACHE_SIZE });

  constructor(options: { secret: Uint8Array; ttlSeconds: number; now: () => Date }) {
    this.#secret = options.secret;
    this.#ttlSeconds = options.ttlSeconds;
    this.#now = options.now;
  }

  async issue(adminId: number): Promise<IssuedSession> {
    const issuedAt = Math.floor(this.#now().getTime() / 1000);
    const exp = issuedAt + this.#ttlSeconds;
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(TOKEN_AUDIENCE)
      .setSubject(String(adminId))
      .setJti(randomUUID())
      .setIssuedAt(issuedAt)
      .setExpirationTime(exp)
      .sign(this.#secret);
    return { token, expiresAt: new Date(exp * 1000), expiresIn: this.#ttlSeconds };
  }

  /** The session of a token verified before and not yet expired; undefined: call `verify`. */
  verifyCached(token: string): VerifiedSession | undefined {
    const session = this.#verified.get(token);
    if (session === undefined) return undefined;
    // jose refuses a token once `exp` <= now (clockTolerance 0); so does this.
    if (session.expiresAt.getTime() <= this.#now().getTime()) {
      this.#verified.delete(token);
      return undefined;
    }
    return session;
  }

  /** Verifies with the algorithm pinned and `exp`, `iss`, `aud` enforced; throws a 401 GatewayError. */
  async verify(token: string): Promise<VerifiedSession> {
    const cached = this.verifyCached(token);
    if (cached !== undefined) return cached;
    try {
      const { payload } = await jwtVerify(token, this.#secret, {
        algorithms: [ALGORITHM],
        issuer: TOKEN_ISSUER,
        audience: TOKEN_AUDIENCE,
        requiredClaims: ['sub', 'exp', 'jti'],
        currentDate: this.#now(),
        clockTolerance: 0,
      });
      const adminId = Number(payload.sub);
      if (!Number.isSafeInteger(adminId) || adminId <= 0 || String(adminId) !== payload.sub) {
        throw new GatewayError('invalid_credential', 'Invalid admin token');
      }
      const session: VerifiedSession = Object.freeze({ kind: 'admin', adminId, expiresAt: new Date(payload.exp! * 1000) });
      this.#verified.set(token, session);
      return session;
    } catch (error) {
      if (error instanceof GatewayError) throw error;
      if (error instanceof joseErrors.JWTExpired) {
        throw new GatewayError('expired_credential', 'Admin token has expired; log in again');
      }
      throw new GatewayError('invalid_credential', 'Invalid admin token');
    }
  }
}
