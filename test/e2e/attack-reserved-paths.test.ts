import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD } from '../support/gateway-process.ts';
import { loginAdmin, request } from '../support/http.ts';
import { rawRequest, type RawResponse } from '../support/raw-http.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

// Issue 32: the gateway's own paths, spelt so that fastify's router did not know them (a
// trailing slash, another case, an encoded slash, dot segments), fell to the route table's
// admin catch-all and were forwarded with the admin token: the platform answered 200, nothing
// changed, and a password change's body reached it. Every spelling is the gateway's now
// (docs/security.md, "Reserved paths"): answered by it, never forwarded, nothing changed.

const PASSWORDS = JSON.stringify({ current_password: ADMIN_PASSWORD, new_password: 'a brand new passphrase 42' });

describe('attack: the reserved paths, spelt another way, are never forwarded', () => {
  let f: ProxyFixture;
  let key: string;
  let id: number;
  let port: number;

  beforeAll(async () => {
    // An MCP path beneath a reserved path is refused at start (test/e2e/startup.test.ts).
    f = await startProxyFixture();
    port = f.port;
    ({ key, id } = await f.key({ scopes: ['events:write'] }));
    // Both credentials warm, and both reach the upstream on their routes: the key on its own,
    // the admin token on the table's admin catch-all, which is where these requests fell.
    expect((await request(`${f.gateway.url}/api/v1/agents/1/events`, { method: 'POST', token: key, json: {} })).status).toBe(200);
    expect((await request(`${f.gateway.url}/dashboard`, { token: f.admin })).status).toBe(200);
  });
  afterAll(async () => {
    await f?.close();
  });

  function send(method: string, target: string, options: { token?: string; body?: string; headers?: string } = {}): Promise<RawResponse> {
    const body = options.body ?? '';
    const type = body === '' ? '' : 'Content-Type: application/json\r\n';
    return rawRequest(
      port,
      `${method} ${target} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${options.token ?? f.admin}\r\n${type}${options.headers ?? ''}` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }

  /** The answer is the gateway's refusal, and nothing reached the upstream. */
  function expectRefusedHere(response: RawResponse, status: number, code: string): void {
    expect(response.status).toBe(status);
    expect(response.headers['content-type']).toContain('application/problem+json');
    expect(JSON.parse(response.body)).toMatchObject({ status, code });
    expect(response.headers['x-origin']).toBeUndefined();
    expect(f.origin.received).toEqual([]);
  }

  /** The key was neither revoked, rotated nor disabled: it still reaches the upstream on its route. */
  async function expectKeyStillWorks(): Promise<void> {
    const response = await request(`${f.gateway.url}/api/v1/agents/1/events`, { method: 'POST', token: key, json: {} });
    expect(response.status).toBe(200);
    const record = await request(`${f.gateway.url}/api/v1/api-keys/${id}`, { token: f.admin });
    expect(record.body).toMatchObject({ id, status: 'active', is_active: true });
    f.origin.clear();
  }

  /** The admin session was not ended. */
  async function expectTokenStillWorks(): Promise<void> {
    expect((await request(`${f.gateway.url}/api/v1/api-keys`, { token: f.admin })).status).toBe(200);
  }

  const keyPath = () => `/api/v1/api-keys/${id}`;

  // [description, target]: the revoke of the key, spelt another way.
  const revokes: Array<[string, () => string]> = [
    ['a trailing slash', () => `${keyPath()}/`],
    ['two trailing slashes', () => `${keyPath()}//`],
    ['upper case', () => `/api/v1/API-KEYS/${id}`],
    ['mixed case and a trailing slash', () => `/API/V1/Api-Keys/${id}/`],
    ['an encoded slash', () => `/api/v1%2Fapi-keys/${id}`],
    ['a lower-case encoded slash', () => `/api/v1/api-keys%2f${id}`],
    ['a double-encoded slash', () => `/api/v1%252Fapi-keys/${id}`],
    ['an encoded backslash', () => `/api/v1%5Capi-keys/${id}`],
    ['a dot segment', () => `/api/v1/./api-keys/${id}`],
    ['a dot-dot segment', () => `/api/v1/x/../api-keys/${id}`],
    ['encoded dot-dot', () => `/api/v1/x/%2e%2e/api-keys/${id}`],
    ['encoded dot-dot and slashes', () => `/api/v1/x%2F%2E%2E%2Fapi-keys/${id}`],
    ['a leading double slash', () => `//api/v1/api-keys/${id}`],
    ['a double slash inside', () => `/api/v1//api-keys/${id}`],
    ['dot-dot above the root', () => `/../../api/v1/api-keys/${id}`],
    ['everything at once', () => `//API/v1/x/%2E%2e/.//Api-Keys%2F${id}/?x=1`],
    // Review of issue 32: each of these reached the upstream (200) while escapes were read as Latin-1.
    ['a dotless ı (upper-cases to I)', () => `/ap%C4%B1/v1/api-keys/${id}`],
    ['a long ſ (upper-cases to S)', () => `/api/v1/api-key%C5%BF/${id}`],
    ['a Kelvin sign for k', () => `/api/v1/api-%E2%84%AAeys/${id}`],
    ['a fullwidth A', () => `/api/v1/%EF%BC%A1pi-keys/${id}`],
    ['an encoded ; parameter', () => `/api%3B/v1/api-keys/${id}`],
    ['a dot-dot with a ; parameter', () => `/api/v1/x/..;/api-keys/${id}`],
    ['a trailing encoded tab', () => `/api/v1/api-keys%09/${id}`],
    ['a trailing encoded space', () => `/api/v1%20/api-keys/${id}`],
    ['a trailing encoded NUL', () => `/api/v1/api-keys%00/${id}`],
  ];

  it.each(revokes)('DELETE of the key with %s: 404 from the gateway, nothing forwarded, the key still works', async (_what, target) => {
    f.origin.clear();
    expectRefusedHere(await send('DELETE', target()), 404, 'not_found');
    await expectKeyStillWorks();
  });

  // Fastify's router reads an encoded slash or an empty segment after `api-keys/` as the key id
  // (`29%2F` is the id `29/`, `29%2Frotate` is `29/rotate`): the endpoint it names, refused for its id or method.
  it.each([
    ['DELETE', 'an encoded slash after the id', () => `${keyPath()}%2F`, 400, 'validation_failed'],
    ['POST', 'the rotation with an encoded slash', () => `${keyPath()}%2Frotate`, 405, 'method_not_allowed'],
    ['DELETE', 'an empty id', () => '/api/v1/api-keys/', 400, 'validation_failed'],
  ])('%s with %s: the key endpoint refuses it (%i), nothing forwarded, the key still works', async (method, _what, target, status, code) => {
    f.origin.clear();
    expectRefusedHere(await send(method, target()), status, code);
    await expectKeyStillWorks();
  });

  it.each([
    ['a trailing slash', () => `${keyPath()}/rotate/`],
    ['upper case', () => `/api/v1/api-keys/${id}/ROTATE`],
    ['a dot-dot segment', () => `${keyPath()}/x/../rotate`],
    ['an encoded dot-dot', () => `${keyPath()}/x/%2E%2E/rotate`],
  ])('rotating the key with %s: 404, nothing forwarded, the key still works and has no successor', async (_what, target) => {
    f.origin.clear();
    expectRefusedHere(await send('POST', target(), { body: '{"grace_seconds":60}' }), 404, 'not_found');
    await expectKeyStillWorks();
    expect((await request(`${f.gateway.url}${keyPath()}`, { token: f.admin })).body).toMatchObject({ rotated_to: null });
  });

  it.each([
    ['a trailing slash', `/api/v1/api-keys/ID/`, '{"disabled":true}'],
    ['upper case', `/API/V1/API-KEYS/ID`, '{"disabled":true}'],
  ])('changing the key with %s: 404, nothing forwarded, the key still works', async (_what, target, body) => {
    f.origin.clear();
    expectRefusedHere(await send('PATCH', target.replace('ID', String(id)), { body }), 404, 'not_found');
    await expectKeyStillWorks();
  });

  it.each([
    ['a trailing slash', '/api/v1/auth/logout/'],
    ['mixed case', '/api/v1/Auth/Logout'],
    ['a dot segment', '/api/v1/auth/./logout'],
    ['an encoded slash', '/api/v1/auth%2Flogout'],
  ])('logout with %s: 404, nothing forwarded, the session goes on', async (_what, target) => {
    f.origin.clear();
    expectRefusedHere(await send('POST', target), 404, 'not_found');
    await expectTokenStillWorks();
  });

  it.each([
    ['a trailing slash', '/api/v1/auth/password/'],
    ['upper case', '/API/V1/AUTH/PASSWORD'],
    ['a dot-dot segment', '/api/v1/x/../auth/password'],
    ['encoded dot-dot', '/api/v1/auth/x/%2e%2e/password'],
    ['a double slash', '/api/v1//auth/password'],
    ['a fullwidth ａ', '/api/v1/%EF%BD%81uth/password'],
    ['an accent that folds into the name', '/api/v1/%C3%A0uth/password'],
    ['a dotless ı', '/ap%C4%B1/v1/auth/password'],
  ])('a password change with %s: 404, the passwords never reach the upstream, nothing changed', async (_what, target) => {
    f.origin.clear();
    expectRefusedHere(await send('POST', target, { body: PASSWORDS }), 404, 'not_found');
    expect(f.origin.received.some((received) => received.body.includes(ADMIN_PASSWORD))).toBe(false);
    await expectTokenStillWorks();
    // The password is still the old one.
    await expect(loginAdmin(f.gateway.url)).resolves.toEqual(expect.any(String));
  });

  it.each<[string, string, string?]>([
    ['POST', '/api/v1/auth/login/', `{"email":"ops@example.test","password":"${ADMIN_PASSWORD}"}`],
    ['GET', '/api/v1/auth/sessions/x/y'],
    ['GET', '/api/v1/auth/anything'],
    ['GET', '/api/v1/auth'],
    ['GET', '/api/v1/api-keys//'],
    ['GET', '/api/v1/api-keys/x/y/z'],
    ['GET', '/api/v1/audit-events/'],
    ['GET', '/api/v1/AUDIT-EVENTS'],
    ['GET', '/api/v1/audit'],
    ['GET', '/api/v1/auditors'],
    ['GET', '/api/v1/openapi.json/'],
    ['GET', '/api/v1/OpenAPI.json'],
    ['GET', '/docs/x'],
    ['GET', '/DOCS'],
    ['GET', '/console'],
    ['GET', '/console/'],
    ['POST', '/Console/keys'],
    ['POST', '/api/v1/auth/mcp', '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'],
    ['PUT', '/docs/x/%2e%2e/y'],
  ])('%s %s: 404 from the gateway, nothing forwarded', async (method, target, body) => {
    f.origin.clear();
    expectRefusedHere(await send(method, target, body === undefined ? {} : { body }), 404, 'not_found');
  });

  // Escapes that are no UTF-8 (an overlong `/` or NUL) cannot be read one way: 400 from the gateway, never forwarded, on any path.
  it.each([
    ['an overlong / before the name', '/api/v1%C0%AFapi-keys/ID'],
    ['an overlong / in a dot-dot', '/x%C0%AF..%C0%AFapi/v1/api-keys/ID'],
    ['an overlong NUL on a path of the upstream', '/dashboard%C0%80'],
  ])('DELETE with %s: refused by the gateway, nothing forwarded, the key still works', async (_what, target) => {
    f.origin.clear();
    expectRefusedHere(await send('DELETE', target.replace('ID', String(id))), 400, 'ambiguous_path');
    await expectKeyStillWorks();
  });

  it('another method on the exact path is still 405 with Allow, and still not forwarded', async () => {
    f.origin.clear();
    const response = await send('PUT', '/api/v1/auth/logout');
    expectRefusedHere(response, 405, 'method_not_allowed');
    expect(response.headers.allow).toBe('POST');
  });

  it('an API key on a reserved path is answered by the gateway too, never by the upstream', async () => {
    f.origin.clear();
    expectRefusedHere(await send('DELETE', `${keyPath()}/`, { token: key }), 404, 'not_found');
    await expectKeyStillWorks();
  });

  it.each([
    ['the key, with a trailing slash', () => `${keyPath()}/`],
    ['the console', () => '/console'],
    ['the audit trail, in upper case', () => '/API/V1/AUDIT-EVENTS'],
    ['the login, through a dot-dot segment', () => '/api/v1/x/../auth/login'],
  ])('a WebSocket upgrade to %s: answered by the gateway and closed, no tunnel, nothing forwarded', async (_what, target) => {
    f.origin.clear();
    const response = await send('GET', target(), { headers: 'Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' });
    expectRefusedHere(response, 404, 'not_found');
  });

  it('a path that merely starts like a reserved one is the upstream\'s, as before', async () => {
    f.origin.clear();
    for (const target of ['/api/v1/api-keysx', '/docsx', '/consoles', '/api/v1/authors', '/caf%C3%A9']) {
      const response = await send('GET', target);
      expect(response.status).toBe(200);
      expect(response.headers['x-origin']).toBe('yes');
    }
    expect(f.origin.received.map((received) => received.url)).toEqual(['/api/v1/api-keysx', '/docsx', '/consoles', '/api/v1/authors', '/caf%C3%A9']);
  });
});
