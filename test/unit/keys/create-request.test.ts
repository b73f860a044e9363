import { describe, expect, it } from 'vitest';
import { createKeyBodySchema, parseCreateKeyRequest } from '../../../src/keys/create-request.ts';

const scopes = new Set(['events:write', 'mcp:agents', 'mcp:tools', 'mcp:calls']);
const schema = createKeyBodySchema(scopes);
const now = new Date('2026-06-01T00:00:00Z');
const parse = (body: unknown) => parseCreateKeyRequest(schema, body, now);

describe('create body validation', () => {
  it.each([
    ['the minimum', { name: 'k' }, { name: 'k', agentId: null, scopes: ['events:write'], expiresAt: null }],
    ['a trimmed name', { name: '  k  ' }, { name: 'k', agentId: null, scopes: ['events:write'], expiresAt: null }],
    ['a bound key', { name: 'k', agent_id: 12 }, { name: 'k', agentId: 12, scopes: ['events:write'], expiresAt: null }],
    ['a null agent', { name: 'k', agent_id: null }, { name: 'k', agentId: null, scopes: ['events:write'], expiresAt: null }],
    ['folded duplicate scopes', { name: 'k', scopes: ['mcp:agents', 'mcp:agents'] }, { name: 'k', agentId: null, scopes: ['mcp:agents'], expiresAt: null }],
    ['an expiry with an offset', { name: 'k', expires_at: '2026-06-02T02:00:00+02:00' }, { name: 'k', agentId: null, scopes: ['events:write'], expiresAt: new Date('2026-06-02T00:00:00Z') }],
    ['a null expiry', { name: 'k', expires_at: null }, { name: 'k', agentId: null, scopes: ['events:write'], expiresAt: null }],
  ])('accepts %s', (_what, body, expected) => {
    expect(parse(body)).toEqual(expected);
  });

  it.each([
    ['not an object', 'k', 'body'],
    ['null', null, 'body'],
    ['an unknown field', { name: 'k', is_active: false }, 'is_active'],
    ['no name', {}, 'name'],
    ['an empty name', { name: '' }, 'name'],
    ['agent_id 0', { name: 'k', agent_id: 0 }, 'agent_id'],
    ['agent_id past the safe range', { name: 'k', agent_id: 2 ** 53 }, 'agent_id'],
    ['agent_id as a string', { name: 'k', agent_id: '3' }, 'agent_id'],
    ['a wildcard', { name: 'k', scopes: ['mcp:*'] }, 'scopes.0'],
    ['an unknown scope', { name: 'k', scopes: ['admin'] }, 'scopes.0'],
    ['an empty list', { name: 'k', scopes: [] }, 'scopes'],
    ['a scope that is not a string', { name: 'k', scopes: [1] }, 'scopes.0'],
    ['a date without time', { name: 'k', expires_at: '2027-01-01' }, 'expires_at'],
    ['an expiry equal to now', { name: 'k', expires_at: now.toISOString() }, 'expires_at'],
    ['an expiry in the past', { name: 'k', expires_at: '2026-05-31T23:59:59Z' }, 'expires_at'],
    ['an impossible date', { name: 'k', expires_at: '2027-02-30T00:00:00Z' }, 'expires_at'],
  ])('refuses %s naming the field', (_what, body, field) => {
    try {
      parse(body);
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({ code: 'validation_failed', status: 400 });
      expect((error as { errors: Array<{ field: string }> }).errors.map((e) => e.field)).toContain(field);
    }
  });
});
