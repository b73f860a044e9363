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
    ['a rate limit', { name: 'k', rate_limit: { requests: 10, per_seconds: 60 } }, { name: 'k', agentId: null, scopes: ['events:write'], expiresAt: null, rateLimit: { requests: 10, perSeconds: 60 } }],
    ['the largest rate limit', { name: 'k', rate_limit: { requests: 1_000_000, per_seconds: 86_400 } }, { name: 'k', agentId: null, scopes: ['events:write'], expiresAt: null, rateLimit: { requests: 1_000_000, perSeconds: 86_400 } }],
    ['no rate limit, whatever the default', { name: 'k', rate_limit: null }, { name: 'k', agentId: null, scopes: ['events:write'], expiresAt: null, rateLimit: null }],
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
    ['a rate limit of 0 requests', { name: 'k', rate_limit: { requests: 0, per_seconds: 60 } }, 'rate_limit.requests'],
    ['a rate limit past a million', { name: 'k', rate_limit: { requests: 1_000_001, per_seconds: 60 } }, 'rate_limit.requests'],
    ['a rate limit of a fraction', { name: 'k', rate_limit: { requests: 1.5, per_seconds: 60 } }, 'rate_limit.requests'],
    ['a rate limit as a string', { name: 'k', rate_limit: { requests: '10', per_seconds: 60 } }, 'rate_limit.requests'],
    ['a rate limit over a day', { name: 'k', rate_limit: { requests: 10, per_seconds: 86_401 } }, 'rate_limit.per_seconds'],
    ['a rate limit of 0 seconds', { name: 'k', rate_limit: { requests: 10, per_seconds: 0 } }, 'rate_limit.per_seconds'],
    ['a rate limit without its interval', { name: 'k', rate_limit: { requests: 10 } }, 'rate_limit.per_seconds'],
    ['a rate limit with a burst', { name: 'k', rate_limit: { requests: 10, per_seconds: 60, burst: 20 } }, 'rate_limit'],
    ['a rate limit as text', { name: 'k', rate_limit: '10/1m' }, 'rate_limit'],
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
