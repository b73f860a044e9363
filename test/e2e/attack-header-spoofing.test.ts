import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

/** Clients must not be able to forge or remove what the upstream trusts. */
describe('attack: forged identity and forwarding headers', () => {
  let f: ProxyFixture;
  let key: string;
  let keyId: number;

  beforeAll(async () => {
    f = await startProxyFixture();
    ({ key, id: keyId } = await f.key({ scopes: ['events:write'], agent_id: 5 }));
  });
  afterAll(async () => {
    await f?.close();
  });

  async function send(extraHeaders: string[]) {
    f.origin.clear();
    const body = '{}';
    const response = await rawRequest(
      f.port,
      [
        'POST /api/v1/agents/5/events HTTP/1.1',
        'Host: gateway.example',
        `Authorization: Bearer ${key}`,
        'Content-Type: application/json',
        `Content-Length: ${body.length}`,
        ...extraHeaders,
        '',
        body,
      ].join('\r\n'),
    );
    return { response, received: f.origin.received };
  }

  it.each([
    ['x-auth-key-id', 'X-Auth-Key-Id: 1'],
    ['x-auth-kind in upper case', 'X-AUTH-KIND: admin'],
    ['x-auth-admin-id', 'x-auth-admin-id: 1'],
    ['x-auth-scopes', 'X-Auth-Scopes: mcp:tools events:write'],
    ['x-auth-agent-id', 'X-Auth-Agent-Id: 99'],
    ['an underscore variant', 'X_Auth_Key_Id: 1'],
    ['a mixed variant', 'X-Auth_Agent-Id: 99'],
    ['an unknown x-auth header', 'X-Auth-Role: root'],
  ])('removes a client-sent %s and sets the real identity', async (_what, header) => {
    const { response, received } = await send([header]);
    expect(response.status).toBe(200);
    expect(received).toHaveLength(1);
    const headers = received[0]!.headers;
    expect(headers).toMatchObject({
      'x-auth-kind': 'api_key',
      'x-auth-key-id': String(keyId),
      'x-auth-agent-id': '5',
      'x-auth-scopes': 'events:write',
    });
    const names = received[0]!.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
    expect(names.filter((name) => /^x[-_]auth[-_]/.test(name)).sort()).toEqual(
      ['x-auth-agent-id', 'x-auth-key-id', 'x-auth-kind', 'x-auth-scopes'],
    );
    expect(headers['x-auth-role']).toBeUndefined();
    expect(headers['x-auth-admin-id']).toBeUndefined();
  });

  it('a Connection header cannot remove the identity headers', async () => {
    const { response, received } = await send(['Connection: keep-alive, x-auth-key-id, x-auth-kind, x-auth-scopes, x-forwarded-for']);
    expect(response.status).toBe(200);
    expect(received[0]!.headers).toMatchObject({
      'x-auth-kind': 'api_key',
      'x-auth-key-id': String(keyId),
      'x-auth-scopes': 'events:write',
      'x-forwarded-for': '127.0.0.1',
    });
  });

  it('replaces client-sent forwarding headers with its own', async () => {
    const { received } = await send([
      'X-Forwarded-For: 10.0.0.1',
      'X-Forwarded-Proto: https',
      'X-Forwarded-Host: admin.internal',
      'Forwarded: for=10.0.0.1;proto=https',
      'X-Real-IP: 10.0.0.1',
      'X-Original-URL: /admin',
      'X-Rewrite-URL: /admin',
    ]);
    const headers = received[0]!.headers;
    expect(headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(headers['x-forwarded-proto']).toBe('http');
    expect(headers['x-forwarded-host']).toBe('gateway.example');
    expect(headers.forwarded).toBeUndefined();
    expect(headers['x-real-ip']).toBeUndefined();
    expect(headers['x-original-url']).toBeUndefined();
    expect(headers['x-rewrite-url']).toBeUndefined();
  });

  it('removes method override headers, and they never change the decision', async () => {
    const { response, received } = await send([
      'X-HTTP-Method-Override: DELETE',
      'X-HTTP-Method: DELETE',
      'X-Method-Override: DELETE',
    ]);
    expect(response.status).toBe(200);
    expect(received[0]!.method).toBe('POST');
    for (const name of ['x-http-method-override', 'x-http-method', 'x-method-override']) {
      expect(received[0]!.headers[name]).toBeUndefined();
    }
  });

  it('an X-Original-URL naming an admin path does not make an API key an admin', async () => {
    f.origin.clear();
    const response = await rawRequest(
      f.port,
      ['GET /dashboard HTTP/1.1', 'Host: x', `Authorization: Bearer ${key}`, 'X-Original-URL: /api/v1/agents/5/events', '', ''].join('\r\n'),
    );
    expect(response.status).toBe(401);
    expect(f.origin.received).toHaveLength(0);
  });

  it('removes Authorization before forwarding', async () => {
    const { received } = await send([]);
    expect(received[0]!.headers.authorization).toBeUndefined();
  });
});

describe('FORWARD_AUTHORIZATION=true', () => {
  let f: ProxyFixture;
  beforeAll(async () => {
    f = await startProxyFixture({ FORWARD_AUTHORIZATION: 'true' });
  });
  afterAll(async () => {
    await f?.close();
  });

  it('keeps the client Authorization header', async () => {
    const { key } = await f.key({ scopes: ['events:write'] });
    const response = await fetch(`${f.gateway.url}/api/v1/agents/1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: '{}',
    });
    expect(response.status).toBe(200);
    expect(f.origin.received.at(-1)!.headers.authorization).toBe(`Bearer ${key}`);
  });
});
