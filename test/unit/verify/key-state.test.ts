import { describe, expect, it } from 'vitest';
import type { ApiKeyRow } from '../../../src/store/store.ts';
import { keyStateOf, ScopeLists } from '../../../src/verify/key-state.ts';

const row = (fields: Partial<ApiKeyRow> = {}): ApiKeyRow => ({
  id: 1,
  name: 'k',
  agentId: null,
  keyPrefix: 'ghk_00000000',
  keyHash: '$argon2id$…',
  scopes: ['events:write'],
  createdAt: new Date(0),
  lastUsedAt: null,
  expiresAt: null,
  revokedAt: null,
  enabled: true,
  updatedAt: new Date(0),
  rateLimit: null,
  rotatedFrom: null,
  rotatedTo: null,
  ...fields,
});

describe('key state', () => {
  it.each([
    ['an active key without expiry', {}, { principal: expect.objectContaining({ expiresAt: null, revoked: false }) }],
    ['a revoked key', { revokedAt: new Date(5) }, { principal: expect.objectContaining({ expiresAt: null, revoked: true }) }],
    ['a key with an expiry', { expiresAt: new Date(1_000) }, { principal: expect.objectContaining({ expiresAt: new Date(1_000), revoked: false }) }],
    ['a disabled key', { enabled: false }, { principal: expect.objectContaining({ revoked: false, disabled: true }) }],
  ])('describes %s', (_what, fields, expected) => {
    expect(keyStateOf(row(fields), 42, new ScopeLists())).toMatchObject({ ...expected, freshUntil: 42 });
  });

  it('hands out a frozen principal', () => {
    const { principal } = keyStateOf(row({ agentId: 9 }), 0, new ScopeLists());
    expect(principal).toEqual({ kind: 'api_key', keyId: 1, agentId: 9, scopes: ['events:write'], expiresAt: null, revoked: false, disabled: false, rateLimit: null });
    expect(Object.isFrozen(principal)).toBe(true);
    expect(Object.isFrozen(principal.scopes)).toBe(true);
  });

  it('shares one scope array between keys holding the same scopes', () => {
    const scopes = new ScopeLists();
    const a = keyStateOf(row({ id: 1, scopes: ['mcp:agents', 'mcp:calls'] }), 0, scopes);
    const b = keyStateOf(row({ id: 2, scopes: ['mcp:agents', 'mcp:calls'] }), 0, scopes);
    const c = keyStateOf(row({ id: 3, scopes: ['mcp:calls'] }), 0, scopes);
    expect(a.principal.scopes).toBe(b.principal.scopes);
    expect(c.principal.scopes).not.toBe(a.principal.scopes);
  });
});
