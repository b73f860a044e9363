import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWellFormedKey } from '../../src/credentials/key-format.ts';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { BAD_KEY_IDS, createKey, loginAdmin, request } from '../support/http.ts';
import { rawRequest } from '../support/raw-http.ts';

const PROBLEM = 'application/problem+json';

describe('key management over HTTP (spawned gateway, embedded store)', () => {
  let gateway: GatewayProcess;
  let admin: string;

  beforeAll(async () => {
    gateway = await startGateway();
    admin = await loginAdmin(gateway.url);
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('creates a key: 201, Location, the full record and the raw key once', async () => {
    const before = Date.now();
    const response = await createKey(gateway.url, admin, { name: 'billing sync', agent_id: 7 });
    expect(response.status).toBe(201);
    const record = response.body;
    expect(response.headers.get('location')).toBe(`/api/v1/api-keys/${record.id}`);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(record).toMatchObject({
      name: 'billing sync',
      agent_id: 7,
      scopes: ['events:write'],
      is_active: true,
      status: 'active',
      last_used_at: null,
      expires_at: null,
    });
    expect(Number.isInteger(record.id)).toBe(true);
    expect(isWellFormedKey(record.key)).toBe(true);
    expect(record.key_prefix).toBe(record.key.slice(0, 12));
    expect(Date.parse(record.created_at)).toBeGreaterThanOrEqual(before - 1000);
  });

  it('lists keys without ever returning the raw key', async () => {
    const created = (await createKey(gateway.url, admin, { name: 'listed', scopes: ['mcp:agents', 'mcp:calls'] })).body;
    const response = await request(`${gateway.url}/api/v1/api-keys`, { token: admin });
    expect(response.status).toBe(200);
    expect(Array.isArray(response.body)).toBe(true);
    const listed = response.body.find((record: { id: number }) => record.id === created.id);
    expect(listed).toEqual({ ...created, key: undefined });
    expect(response.text).not.toContain(created.key);
    for (const record of response.body) expect(record).not.toHaveProperty('key');
  });

  it('keeps explicit scopes, folds duplicates, takes null agent_id and a future expires_at', async () => {
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const response = await createKey(gateway.url, admin, {
      name: 'tools',
      agent_id: null,
      scopes: ['mcp:tools', 'mcp:agents', 'mcp:tools'],
      expires_at: expiresAt,
    });
    expect(response.status).toBe(201);
    expect(response.body.scopes).toEqual(['mcp:tools', 'mcp:agents']);
    expect(response.body.agent_id).toBeNull();
    expect(response.body.expires_at).toBe(expiresAt);
  });

  it('revokes: 204 with no content, 204 again, and the key stays listed inactive', async () => {
    const created = (await createKey(gateway.url, admin, { name: 'to revoke' })).body;
    const first = await request(`${gateway.url}/api/v1/api-keys/${created.id}`, { method: 'DELETE', token: admin });
    expect(first.status).toBe(204);
    expect(first.text).toBe('');
    const again = await request(`${gateway.url}/api/v1/api-keys/${created.id}`, { method: 'DELETE', token: admin });
    expect(again.status).toBe(204);
    const listed = (await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body.find(
      (record: { id: number }) => record.id === created.id,
    );
    expect(listed).toMatchObject({ is_active: false, status: 'revoked' });

    // Each change was stored with its event before its answer: no wait, no flush.
    const trail = (await request(`${gateway.url}/api/v1/audit-events?limit=100`, { token: admin })).body;
    const events = [...trail].reverse().filter((event: { subject_id: string; action: string }) => event.subject_id === String(created.id) && event.action.startsWith('key_'));
    expect(events.map((event: { action: string }) => event.action)).toEqual(['key_created', 'key_revoked', 'key_revoked']);
    for (const event of events) {
      expect(event).toMatchObject({ actor_kind: 'admin', actor_id: expect.stringMatching(/^[1-9][0-9]*$/), client_address: '127.0.0.1', detail: {} });
    }
  });

  it('an unknown id is refused without an audit event', async () => {
    const before = (await request(`${gateway.url}/api/v1/audit-events?limit=1`, { token: admin })).body;
    expect((await request(`${gateway.url}/api/v1/api-keys/999998`, { method: 'DELETE', token: admin })).status).toBe(404);
    expect((await request(`${gateway.url}/api/v1/audit-events?limit=1`, { token: admin })).body).toEqual(before);
  });

  it.each(BAD_KEY_IDS)('DELETE with %s (%s) is %i %s', async (_what, id, status, code) => {
    const response = await request(`${gateway.url}/api/v1/api-keys/${id}`, { method: 'DELETE', token: admin });
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toContain(PROBLEM);
    expect(response.body).toMatchObject({ status, code });
  });

  const past = '2020-01-01T00:00:00Z';
  it.each([
    ['an unknown field', { name: 'x', admin: true }, 'admin'],
    ['a missing name', { scopes: ['events:write'] }, 'name'],
    ['an empty name', { name: '' }, 'name'],
    ['a blank name', { name: '   ' }, 'name'],
    ['a name that is not a string', { name: 42 }, 'name'],
    ['an over-long name', { name: 'x'.repeat(201) }, 'name'],
    ['agent_id 0', { name: 'x', agent_id: 0 }, 'agent_id'],
    ['a negative agent_id', { name: 'x', agent_id: -4 }, 'agent_id'],
    ['a fractional agent_id', { name: 'x', agent_id: 1.5 }, 'agent_id'],
    ['agent_id as a string', { name: 'x', agent_id: '5' }, 'agent_id'],
    ['an unknown scope', { name: 'x', scopes: ['events:read'] }, 'scopes.0'],
    ['a wildcard scope', { name: 'x', scopes: ['mcp:*'] }, 'scopes.0'],
    ['a bare wildcard', { name: 'x', scopes: ['*'] }, 'scopes.0'],
    ['an empty scopes list', { name: 'x', scopes: [] }, 'scopes'],
    ['scopes as a string', { name: 'x', scopes: 'events:write' }, 'scopes'],
    ['an expires_at that is not ISO 8601', { name: 'x', expires_at: 'tomorrow' }, 'expires_at'],
    ['an expires_at without a time zone', { name: 'x', expires_at: '2099-01-01T00:00:00' }, 'expires_at'],
    ['an expires_at in the past', { name: 'x', expires_at: past }, 'expires_at'],
    ['an expires_at as a number', { name: 'x', expires_at: 4102444800 }, 'expires_at'],
  ])('refuses %s with 400 validation_failed naming the field', async (_what, body, field) => {
    const before = (await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body.length;
    const response = await createKey(gateway.url, admin, body);
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toContain(PROBLEM);
    expect(response.body).toMatchObject({ status: 400, code: 'validation_failed', title: expect.any(String) });
    expect(response.body.errors.map((error: { field: string }) => error.field)).toContain(field);
    const after = (await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body.length;
    expect(after).toBe(before);
  });

  it.each([
    ['a JSON array', '[]', 'application/json', 400],
    ['a JSON string', '"name"', 'application/json', 400],
    ['broken JSON', '{"name": ', 'application/json', 400],
    ['an empty JSON body', '', 'application/json', 400],
    ['prototype pollution', '{"name":"x","__proto__":{"admin":true}}', 'application/json', 400],
    ['a form body', 'name=x', 'application/x-www-form-urlencoded', 415],
    ['plain text', '{"name":"x"}', 'text/plain', 415],
  ])('refuses %s as a create body with a problem, never a 500', async (_what, body, type, status) => {
    const response = await request(`${gateway.url}/api/v1/api-keys`, {
      method: 'POST',
      token: admin,
      headers: { 'content-type': type },
      body,
    });
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toContain(PROBLEM);
    expect(response.body.status).toBe(status);
  });

  // Raw bytes: the whole upload is sent before the answer is read (lingering-close.test.ts has fetch).
  it('refuses an oversized body with 413', async () => {
    const body = JSON.stringify({ name: 'x'.repeat(2_000_000) });
    const head = ['POST /api/v1/api-keys HTTP/1.1', 'Host: x', `Authorization: Bearer ${admin}`, 'Content-Type: application/json', `Content-Length: ${body.length}`];
    const response = await rawRequest(Number(new URL(gateway.url).port), `${head.join('\r\n')}\r\n\r\n${body}`);
    expect(response.status).toBe(413);
    expect(JSON.parse(response.body).code).toBe('payload_too_large');
  });

  describe('credentials', () => {
    let apiKey: string;
    beforeAll(async () => {
      apiKey = (await createKey(gateway.url, admin, { name: 'all scopes', scopes: ['events:write', 'mcp:tools'] })).body.key;
    });

    const endpoints = [
      ['POST', '/api/v1/api-keys', { name: 'x' }],
      ['GET', '/api/v1/api-keys', undefined],
      ['DELETE', '/api/v1/api-keys/1', undefined],
    ] as const;

    it.each(endpoints)('%s %s with an API key is 401 wrong_credential_type', async (method, path, json) => {
      const count = (await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body.length;
      const response = await request(`${gateway.url}${path}`, { method, token: apiKey, json });
      expect(response.status).toBe(401);
      expect(response.body.code).toBe('wrong_credential_type');
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
      expect((await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body.length).toBe(count);
    });

    it.each(endpoints)('%s %s without a credential is 401 missing_credential', async (method, path, json) => {
      const response = await request(`${gateway.url}${path}`, { method, json });
      expect(response.status).toBe(401);
      expect(response.body.code).toBe('missing_credential');
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);
    });

    it.each([
      ['a garbage token', 'Bearer not-a-token'],
      ['a JWT with a bad signature', `Bearer ${'eyJhbGciOiJIUzI1NiJ9'}.${'eyJzdWIiOiIxIn0'}.c2lnbmF0dXJl`],
      ['an unsigned JWT (alg none)', `Bearer ${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from('{"sub":"1","iss":"gatehouse","aud":"gatehouse-admin","exp":9999999999}').toString('base64url')}.`],
      ['a Basic credential', `Basic ${Buffer.from('a:b').toString('base64')}`],
      ['a bare scheme', 'Bearer'],
    ])('%s is 401 invalid_credential', async (_what, authorization) => {
      const response = await request(`${gateway.url}/api/v1/api-keys`, { headers: { authorization } });
      expect(response.status).toBe(401);
      expect(['invalid_credential', 'missing_credential']).toContain(response.body.code);
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
    });

    it('accepts the bearer scheme in any case', async () => {
      const response = await request(`${gateway.url}/api/v1/api-keys`, { headers: { authorization: `bEaReR ${admin}` } });
      expect(response.status).toBe(200);
    });

    it('a malformed key on an admin endpoint never reveals whether it exists', async () => {
      const response = await request(`${gateway.url}/api/v1/api-keys`, { token: apiKey.slice(0, -1) + 'x' });
      expect(response.status).toBe(401);
    });
  });

  it('refuses other methods on its own paths with 405 and Allow', async () => {
    const response = await request(`${gateway.url}/api/v1/api-keys`, { method: 'PUT', token: admin, json: {} });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, POST');
    expect(response.body.code).toBe('method_not_allowed');
  });
});
