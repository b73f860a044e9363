import type { EndedSessions } from '../admin/ended-sessions.ts';
import type { SessionTokens } from '../admin/sessions.ts';
import type { BearerCredential } from '../credentials/bearer.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { denialOf, type Deny } from '../policy/denial.ts';
import type { AdminPrincipal, PresentedCredential, Principal } from '../policy/principal.ts';
import type { Store } from '../store/store.ts';
import type { KeyVerifier } from '../verify/key-verifier.ts';

/** A credential `decide()` has asked to authenticate: an API key or an admin session token. */
export type Authenticable = Extract<BearerCredential, { kind: 'api_key' | 'jwt' }>;

/** Who the credential is, or why it cannot be told; a promise only when the caches could not answer. */
export type Authentication = Principal | Deny | Promise<Principal | Deny>;

/**
 * The first step of the pipeline (docs/architecture.md, "One pipeline"): turns a presented
 * credential into the principal it proves, or says why it proves none (`invalid_credential`,
 * a throttled prefix's `rate_limited`) as a value. Whether that principal may be used
 * (revoked, expired, its type, its scopes) is `decide()`'s, not this. Only failures (the store
 * or Redis down) reject.
 */
export class Authenticator {
  readonly #verifier: KeyVerifier;
  readonly #sessions: SessionTokens;
  readonly #ended: EndedSessions | undefined;
  readonly #store: Pick<Store, 'findAdminSession'> | undefined;

  /**
   * `ended`: the sessions ended, checked in memory; `store`: asked instead while this replica's
   * subscription to the revocation bus is not proven (it may have missed an end), as key state is.
   */
  constructor(deps: { verifier: KeyVerifier; sessions: SessionTokens; ended?: EndedSessions; store?: Pick<Store, 'findAdminSession'> }) {
    this.#verifier = deps.verifier;
    this.#sessions = deps.sessions;
    this.#ended = deps.ended;
    this.#store = deps.store;
  }

  /**
   * A cached credential is answered synchronously: no promise, no microtask. `claimant` (the
   * client's address) takes its turn at a throttled prefix's one verify a second
   * (docs/security.md, "Guesses behind a real key's prefix").
   */
  authenticate(credential: Authenticable, claimant: string): Authentication {
    if (credential.kind === 'api_key') {
      return this.#verifier.tryVerifyCached(credential.token) ?? this.#verifier.verify(credential.token, claimant).catch(refusalAsValue);
    }
    const cached = this.#sessions.verifyCached(credential.token);
    if (cached !== undefined) return this.#sessionState(cached);
    return this.#sessions.verify(credential.token).then((session) => this.#sessionState(session), refusalAsValue);
  }

  /** The session as it stands: ended in memory, or (a replica that may have missed an end) in the store. */
  #sessionState(session: AdminPrincipal): AdminPrincipal | Promise<AdminPrincipal> {
    const ended = this.#ended;
    if (ended === undefined) return session;
    const known = ended.apply(session);
    // Asked of the store while an end may have been missed: degraded, or not yet re-read since.
    if (known.revoked || (!this.#verifier.degraded && ended.synced) || this.#store === undefined) return known;
    return this.#store.findAdminSession(session.sessionId).then((row) => {
      if (row?.endedAt == null) return session;
      ended.end(row.id, row.expiresAt);
      return ended.revoked(session);
    });
  }
}

/** The credential as `decide()` sees it before authentication: its kind by shape. */
export function presentedKindOf(credential: BearerCredential): PresentedCredential {
  switch (credential.kind) {
    case 'none':
    case 'unknown':
    case 'api_key':
      return credential.kind;
    case 'jwt':
      return 'admin';
    case 'malformed':
      return 'unknown';
  }
}

/** The verifiers raise their refusals; here they become values, and only failures go on as errors. */
function refusalAsValue(error: unknown): Deny {
  if (error instanceof GatewayError && error.status < 500) return denialOf(error);
  throw error;
}
