import { describe, expect, it } from 'vitest';
import type { ApiKeyPrincipal } from '../../../src/policy/principal.ts';
import { IdentityHeaderValues } from '../../../src/proxy/upstream-headers.ts';

const values = new IdentityHeaderValues();
const identityHeadersOf = (principal: Parameters<IdentityHeaderValues['of']>[0]) => values.of(principal);

const key = (keyId: number, agentId: number | null, scopes: readonly string[]): ApiKeyPrincipal => ({
  kind: 'api_key',
  keyId,
  agentId,
  scopes,
  expiresAt: null,
  revoked: false,
  disabled: false,
  rateLimit: null,
});

describe('identityHeadersOf', () => {
  it('names the key, its agent binding and its scopes', () => {
    expect(identityHeadersOf(key(42, 7, ['events:write', 'mcp:tools']))).toEqual([
      'x-auth-kind', 'api_key', 'x-auth-key-id', '42', 'x-auth-agent-id', '7', 'x-auth-scopes', 'events:write mcp:tools',
    ]);
  });

  it('leaves out the agent header for a key bound to no agent', () => {
    expect(identityHeadersOf(key(3, null, ['events:write']))).toEqual(['x-auth-kind', 'api_key', 'x-auth-key-id', '3', 'x-auth-scopes', 'events:write']);
  });

  it('names an admin by id, and nothing for no principal', () => {
    expect(identityHeadersOf({ kind: 'admin', adminId: 1, expiresAt: new Date(0), sessionId: 's-1', revoked: false })).toEqual(['x-auth-kind', 'admin', 'x-auth-admin-id', '1']);
    expect(identityHeadersOf(null)).toEqual([]);
  });
});
