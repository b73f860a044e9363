import type { RateRule } from './rate-limits.ts';

/** Who a verified credential is. Produced by authentication, consumed by `decide()`. */
export type Principal = AdminPrincipal | ApiKeyPrincipal;

/** The credential a request presents, by its shape alone (no I/O): what `decide()` knows before authentication. */
export type PresentedCredential = 'none' | 'unknown' | 'api_key' | 'admin';

export interface AdminPrincipal {
  kind: 'admin';
  adminId: number;
  /** The session token's `exp`: checked by `decide()` against the clock on every request. */
  expiresAt: Date;
  /** The token's `jti`: the session it belongs to. */
  sessionId: string;
  /** The session was ended (logout, deleted, password changed): `decide()` refuses it. */
  revoked: boolean;
}

export interface ApiKeyPrincipal {
  kind: 'api_key';
  keyId: number;
  /** null: the key acts for every agent. */
  agentId: number | null;
  /** As granted at creation; aliases such as `mcp:tools` are expanded by the policy, not here. */
  scopes: readonly string[];
  /** Checked against the clock on every request by `decide()`, never cached as a boolean. */
  expiresAt: Date | null;
  /** The key's secret was proven but the key is revoked: `decide()` refuses it. */
  revoked: boolean;
  /** Disabled by an admin: refused until enabled again. */
  disabled: boolean;
  /** The key's own rate limit; null: none (tool limits still apply). */
  rateLimit: RateRule | null;
}
