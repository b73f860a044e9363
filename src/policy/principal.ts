/** Who a verified credential is. Produced by verification, consumed by `decide()`. */
export type Principal = AdminPrincipal | ApiKeyPrincipal;

export interface AdminPrincipal {
  kind: 'admin';
  adminId: number;
}

export interface ApiKeyPrincipal {
  kind: 'api_key';
  keyId: number;
  /** null: the key acts for every agent. */
  agentId: number | null;
  /** As granted at creation; aliases such as `mcp:tools` are expanded by the policy, not here. */
  scopes: readonly string[];
  /** Checked against the clock on every request, never cached as a boolean. */
  expiresAt: Date | null;
}
