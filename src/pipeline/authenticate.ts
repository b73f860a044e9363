import type { SessionTokens } from '../admin/sessions.ts';
import type { BearerCredential } from '../credentials/bearer.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { denialOf, type Deny } from '../policy/denial.ts';
import type { PresentedCredential, Principal } from '../policy/principal.ts';
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

  constructor(deps: { verifier: KeyVerifier; sessions: SessionTokens }) {
    this.#verifier = deps.verifier;
    this.#sessions = deps.sessions;
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
    return this.#sessions.verifyCached(credential.token) ?? this.#sessions.verify(credential.token).catch(refusalAsValue);
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
