import { randomUUID } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT, type JWTPayload } from 'jose';
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
  /** The token's `jti`. */
  sessionId: string;
  issuedAt: Date;
  expiresAt: Date;
  expiresIn: number;
}

export type VerifiedSession = AdminPrincipal;

/**
 * Admin session tokens: HS256 JWTs with `iss`, `aud`, `sub`, `jti`, `iat` and `exp`.
 * Verification proves who a token is; whether it is still valid is `decide()`'s rule, which
 * checks the principal's `expiresAt` (the token's `exp`) against the clock on every request.
 * A verified token is remembered (what it proves never changes; whether its session was ended is
 * the ended sessions' to say, ended-sessions.ts), so a repeated verification costs a lookup
 * instead of the HMAC and the parsing.
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
    const sessionId = randomUUID();
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(TOKEN_AUDIENCE)
      .setSubject(String(adminId))
      .setJti(sessionId)
      .setIssuedAt(issuedAt)
      .setExpirationTime(exp)
      .sign(this.#secret);
    return { token, sessionId, issuedAt: new Date(issuedAt * 1000), expiresAt: new Date(exp * 1000), expiresIn: this.#ttlSeconds };
  }

  /** The session of a token verified before; undefined: call `verify`. */
  verifyCached(token: string): VerifiedSession | undefined {
    return this.#verified.get(token);
  }

  /**
   * Verifies with the algorithm pinned and `iss`, `aud`, `sub`, `jti` and `exp` required;
   * throws a 401 GatewayError for a token that is not one of ours. A token past its `exp` is
   * ours all the same (jose checks `exp` after everything else): its session is returned, for
   * `decide()` to refuse as expired.
   */
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
      const session = sessionOf(payload);
      this.#verified.set(token, session);
      return session;
    } catch (error) {
      if (error instanceof GatewayError) throw error;
      // Thrown only once the signature and every other claim have passed.
      if (error instanceof joseErrors.JWTExpired && error.claim === 'exp') return sessionOf(error.payload);
      throw new GatewayError('invalid_credential', 'Invalid admin token');
    }
  }
}

function sessionOf(payload: JWTPayload): VerifiedSession {
  const adminId = Number(payload.sub);
  if (!Number.isSafeInteger(adminId) || adminId <= 0 || String(adminId) !== payload.sub || typeof payload.exp !== 'number') {
    throw new GatewayError('invalid_credential', 'Invalid admin token');
  }
  if (typeof payload.jti !== 'string' || payload.jti === '') throw new GatewayError('invalid_credential', 'Invalid admin token');
  return Object.freeze({ kind: 'admin', adminId, expiresAt: new Date(payload.exp * 1000), sessionId: payload.jti, revoked: false });
}
