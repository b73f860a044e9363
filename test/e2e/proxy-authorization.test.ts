import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from '../support/until.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/gateway-process.ts';
import { request } from '../support/http.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

/** A config dir with the default tables plus one operator-added public route. */
function configWithPublicRoute(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-config-'));
  const routes = readFileSync(join(REPO_ROOT, 'config/routes.yaml'), 'utf8').replace(
    '  - name: admin\n',
    '  - name: dashboard_assets\n    path: /assets/**\n    methods: [GET, HEAD]\n    credential: none\n\n  - name: admin\n',
  );
  writeFileSync(join(dir, 'routes.yaml'), routes);
  writeFileSync(join(dir, 'mcp-tools.yaml'), readFileSync(join(REPO_ROOT, 'config/mcp-tools.yaml')));
  return dir;
}

describe('authorization of proxied requests (spawned gateway, recording origin)', () => {
  let f: ProxyFixture;
  let writer: string;
  let bound: string;
  let boundId: number;
  let mcpOnly: string;

  beforeAll(async () => {
    f = await startProxyFixture({ CONFIG_DIR: configWithPublicRoute() });
    writer = (await f.key({ scopes: ['events:write'] })).key;
    ({ key: bound, id: boundId } = await f.key({ scopes: ['events:write'], agent_id: 7 }));
    mcpOnly = (await f.key({ scopes: ['mcp:agents'] })).key;
  });
  afterAll(async () => {
    await f?.close();
  });

  const events = (agent: string | number) => `/api/v1/agents/${agent}/events`;

  it('forwards an allowed event with the identity headers, and the body, to the upstream', async () => {
    f.origin.clear();
    const response = await request(`${f.gateway.url}${events(7)}?source=test`, {
      method: 'POST',
      token: bound,
      json: { type: 'call.ended', id: 1 },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-origin')).toBe('yes');
    const [received] = f.origin.received;
    expect(received).toMatchObject({ method: 'POST', url: `${events(7)}?source=test`, body: '{"type":"call.ended","id":1}' });
    expect(received!.headers).toMatchObject({
      'x-auth-kind': 'api_key',
      'x-auth-key-id': String(boundId),
      'x-auth-agent-id': '7',
      'x-auth-scopes': 'events:write',
      'x-forwarded-for': '127.0.0.1',
      'x-forwarded-proto': 'http',
    });
    expect(received!.headers.authorization).toBeUndefined();
  });

  it('an unbound key acts for every agent and sends no x-auth-agent-id', async () => {
    f.origin.clear();
    for (const agent of [1, 2, 9007199254740991]) {
      expect((await request(`${f.gateway.url}${events(agent)}`, { method: 'POST', token: writer, json: {} })).status).toBe(200);
    }
    expect(f.origin.received).toHaveLength(3);
    expect(f.origin.received[0]!.headers['x-auth-agent-id']).toBeUndefined();
  });

  it('forwards an admin token to admin routes with x-auth-admin-id', async () => {
    f.origin.clear();
    const response = await request(`${f.gateway.url}/dashboard/settings`, { token: f.admin });
    expect(response.status).toBe(200);
    expect(f.origin.received[0]!.headers).toMatchObject({ 'x-auth-kind': 'admin', 'x-auth-admin-id': expect.stringMatching(/^\d+$/) });
    expect(f.origin.received[0]!.headers['x-auth-key-id']).toBeUndefined();
  });

  it('serves an operator-added public route without a credential', async () => {
    f.origin.clear();
    const response = await request(`${f.gateway.url}/assets/app.js`);
    expect(response.status).toBe(200);
    expect(f.origin.received).toHaveLength(1);
    expect(f.origin.received[0]!.headers['x-auth-kind']).toBeUndefined();
  });

  const refusals: Array<[string, () => { path: string; method?: string; token?: string; authorization?: string }, number, string]> = [
    ['no credential on the events route', () => ({ path: events(7) }), 401, 'missing_credential'],
    ['no credential on an admin route', () => ({ path: '/dashboard' }), 401, 'missing_credential'],
    ['an admin token on the events route', () => ({ path: events(7), token: f.admin }), 401, 'wrong_credential_type'],
    ['an API key on an admin route', () => ({ path: '/dashboard', token: writer }), 401, 'wrong_credential_type'],
    ['a key without events:write', () => ({ path: events(7), token: mcpOnly }), 403, 'insufficient_scope'],
    ['a bound key for another agent', () => ({ path: events(8), token: bound }), 403, 'agent_mismatch'],
    ['a key with a bad checksum', () => ({ path: events(7), token: writer.slice(0, -2) + (writer.endsWith('aa') ? 'bb' : 'aa') }), 401, 'invalid_credential'],
    ['a truncated key', () => ({ path: events(7), token: writer.slice(0, -1) }), 401, 'invalid_credential'],
    ['garbage', () => ({ path: events(7), token: 'hello' }), 401, 'invalid_credential'],
    ['a Basic credential', () => ({ path: events(7), authorization: 'Basic dXNlcjpwYXNz' }), 401, 'invalid_credential'],
    ['agent id 02', () => ({ path: events('02'), token: writer }), 400, 'validation_failed'],
    ['agent id +2', () => ({ path: events('+2'), token: writer }), 400, 'validation_failed'],
    ['agent id 2.0', () => ({ path: events('2.0'), token: writer }), 400, 'validation_failed'],
    ['agent id 0', () => ({ path: events('0'), token: writer }), 400, 'validation_failed'],
    ['agent id -1', () => ({ path: events('-1'), token: writer }), 400, 'validation_failed'],
    ['agent id 1e3', () => ({ path: events('1e3'), token: writer }), 400, 'validation_failed'],
    ['agent id past 2^53', () => ({ path: events('9007199254740993'), token: writer }), 400, 'validation_failed'],
    ['agent id abc', () => ({ path: events('abc'), token: writer }), 400, 'validation_failed'],
    ['PUT on the MCP path', () => ({ path: '/mcp', method: 'PUT', token: f.admin }), 405, 'method_not_allowed'],
    ['a public route with another method', () => ({ path: '/assets/app.js', method: 'POST' }), 405, 'method_not_allowed'],
  ];

  it.each(refusals)('refuses %s (%i %s) and forwards nothing', async (_what, make, status, code) => {
    const { path, method = 'POST', token, authorization } = make();
    f.origin.clear();
    const headers: Record<string, string> = authorization ? { authorization } : {};
    const response = await request(`${f.gateway.url}${path}`, { method, token, headers, json: method === 'GET' ? undefined : {} });
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    expect(response.body).toMatchObject({ status, code });
    if (status === 401) expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
    if (status === 403) expect(response.headers.get('www-authenticate')).toMatch(/^Bearer .*error="insufficient_scope"/);
    expect(f.origin.received).toHaveLength(0);
  });

  it('names the missing scope in WWW-Authenticate', async () => {
    const response = await request(`${f.gateway.url}${events(7)}`, { method: 'POST', token: mcpOnly, json: {} });
    expect(response.headers.get('www-authenticate')).toContain('scope="events:write"');
  });

  it('a revoked key is refused on its very next call', async () => {
    const { key, id } = await f.key({ scopes: ['events:write'] });
    expect((await request(`${f.gateway.url}${events(1)}`, { method: 'POST', token: key, json: {} })).status).toBe(200);
    expect((await request(`${f.gateway.url}/api/v1/api-keys/${id}`, { method: 'DELETE', token: f.admin })).status).toBe(204);
    f.origin.clear();
    const refused = await request(`${f.gateway.url}${events(1)}`, { method: 'POST', token: key, json: {} });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('revoked_credential');
    expect(f.origin.received).toHaveLength(0);
  });

  it('last_used_at shows in the list after a use, stamped with when the key was used', async () => {
    const { key, id } = await f.key({ scopes: ['events:write'] });
    // Whole milliseconds on both sides: the stamp lies between the request's start and its answer.
    const sentAt = Date.now();
    await request(`${f.gateway.url}${events(3)}`, { method: 'POST', token: key, json: {} });
    const answeredAt = Date.now();
    let lastUsed: string | null = null;
    await until(async () => {
      const listed = (await request(`${f.gateway.url}/api/v1/api-keys`, { token: f.admin })).body;
      lastUsed = listed.find((record: { id: number }) => record.id === id).last_used_at;
      return lastUsed !== null;
    }, 'last_used_at in the list');
    expect(Date.parse(lastUsed!)).toBeGreaterThanOrEqual(sentAt);
    expect(Date.parse(lastUsed!)).toBeLessThanOrEqual(answeredAt);
  });
});
