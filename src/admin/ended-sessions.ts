import type { AdminPrincipal } from '../policy/principal.ts';

/**
 * The admin sessions ended while their tokens would still be valid, in this replica's memory:
 * an admin token is checked against them on every request without I/O (docs/api-keys.md,
 * "Admin sessions"). Each is forgotten once its token has expired, so what is kept is bounded
 * by the token lifetime: the sessions ended within the last `ADMIN_TOKEN_TTL`.
 */
export class EndedSessions {
  /** Session id → when its token expires (ms). Insertion order is end order, near enough to expiry order for the purge. */
  readonly #ended = new Map<string, number>();
  /** A revoked copy of each ended session's principal, made once. */
  readonly #revoked = new WeakMap<AdminPrincipal, AdminPrincipal>();
  readonly #now: () => number;
  /** For an end whose token's expiry is not known (told by another replica): the longest a token lives. */
  readonly #tokenTtlMs: number;

  constructor(options: { now: () => number; tokenTtlMs: number }) {
    this.#now = options.now;
    this.#tokenTtlMs = options.tokenTtlMs;
  }

  end(sessionId: string, expiresAt?: Date): void {
    this.#purge();
    const until = expiresAt?.getTime() ?? this.#now() + this.#tokenTtlMs;
    this.#ended.set(sessionId, Math.max(until, this.#ended.get(sessionId) ?? 0));
  }

  /** The principal as `decide()` must see it: revoked when its session has ended. */
  apply(principal: AdminPrincipal): AdminPrincipal {
    if (this.#ended.size === 0 || !this.#ended.has(principal.sessionId)) return principal;
    return this.revoked(principal);
  }

  revoked(principal: AdminPrincipal): AdminPrincipal {
    let copy = this.#revoked.get(principal);
    if (copy === undefined) {
      copy = Object.freeze({ ...principal, revoked: true });
      this.#revoked.set(principal, copy);
    }
    return copy;
  }

  get size(): number {
    return this.#ended.size;
  }

  #purge(): void {
    const now = this.#now();
    for (const [id, until] of this.#ended) if (until <= now) this.#ended.delete(id);
  }
}
