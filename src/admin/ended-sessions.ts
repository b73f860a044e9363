import type { AdminPrincipal } from '../policy/principal.ts';

/**
 * The admin sessions ended while their tokens would still be valid, in this replica's memory:
 * an admin token is checked against them on every request without I/O (docs/api-keys.md,
 * "Admin sessions"). Each is forgotten once its token has expired, so what is kept is bounded
 * by the token lifetime: the sessions ended within the last `ADMIN_TOKEN_TTL`.
 *
 * `synced` is false from the moment this replica may have missed an end (its subscription to
 * the revocation bus is not proven) until the ended sessions have been read from the store
 * again after it is: meanwhile every admin request asks the store (src/pipeline/authenticate.ts).
 */
export class EndedSessions {
  /** Session id → when its token expires (ms), in the order they were learnt. */
  readonly #ended = new Map<string, number>();
  /** A revoked copy of each ended session's principal, made once. */
  readonly #revoked = new WeakMap<AdminPrincipal, AdminPrincipal>();
  readonly #now: () => number;
  /** For an end whose token's expiry is not known (told by another replica): the longest a token lives. */
  readonly #tokenTtlMs: number;
  /** Told of each session learnt to be ended, once: its streams end with it. */
  readonly #onEnded: (sessionId: string) => void;
  #synced = true;
  /** Counts `unsync`s: a read of the store that began before the last one proves nothing. */
  #generation = 0;

  constructor(options: { now: () => number; tokenTtlMs: number; onEnded?: (sessionId: string) => void }) {
    this.#now = options.now;
    this.#tokenTtlMs = options.tokenTtlMs;
    this.#onEnded = options.onEnded ?? (() => {});
  }

  /** Records an end (every way this replica learns of one comes here); true when it was not known. */
  end(sessionId: string, expiresAt?: Date): boolean {
    this.#purge();
    const until = expiresAt?.getTime() ?? this.#now() + this.#tokenTtlMs;
    const known = this.#ended.get(sessionId);
    this.#ended.set(sessionId, Math.max(until, known ?? 0));
    if (known !== undefined) return false;
    this.#onEnded(sessionId);
    return true;
  }

  /** Every end read from the store (at start, after the subscription is proven again, on each refresh). */
  load(sessions: Iterable<{ id: string; expiresAt: Date }>): void {
    for (const session of sessions) this.end(session.id, session.expiresAt);
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

  get synced(): boolean {
    return this.#synced;
  }

  get generation(): number {
    return this.#generation;
  }

  /** Ends may have been missed: the store decides until `markSynced`. */
  unsync(): void {
    this.#synced = false;
    this.#generation++;
  }

  /** In sync again, when the read of the store that proves it began after the last `unsync` (`generation` read before it). */
  markSynced(generation: number): void {
    if (generation === this.#generation) this.#synced = true;
  }

  get size(): number {
    return this.#ended.size;
  }

  /** From the oldest learnt, while expired: cheap on every end, and nothing lives much past its token. */
  #purge(): void {
    const now = this.#now();
    for (const [id, until] of this.#ended) {
      if (until > now) return;
      this.#ended.delete(id);
    }
  }
}
