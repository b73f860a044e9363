import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../support/http.ts';
import type { ReceivedRequest } from '../support/origin.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** How a request's key was decided, from the verifier's counters: an argon2id verify (cold) or a synchronous cache hit. */
interface Decided {
  argon2: number;
  cacheHits: number;
}

/** The upstream request without its request id, headers in the order received. */
function upstreamView(received: ReceivedRequest): { method: string; url: string; body: string; rawHeaders: string[] } {
  const rawHeaders: string[] = [];
  for (let i = 0; i < received.rawHeaders.length; i += 2) {
    if (received.rawHeaders[i]!.toLowerCase() !== 'x-request-id') rawHeaders.push(received.rawHeaders[i]!, received.rawHeaders[i + 1]!);
  }
  return { method: received.method, url: received.url, body: received.body, rawHeaders };
}

/** The client's answer without what differs per response by design: the date and the request id. */
function answerView(response: Response, text: string): { status: number; headers: Array<[string, string]>; body: string } {
  const headers = [...response.headers].filter(([name]) => name !== 'date' && name !== 'x-request-id');
  return { status: response.status, headers, body: text };
}

describe('the one door, cold and cached (spawned gateway, recording origin)', () => {
  let f: ProxyFixture;

  beforeAll(async () => {
    f = await startProxyFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  async function counters(): Promise<Decided> {
    const text = await (await fetch(`${f.gateway.opsUrl}/metrics`)).text();
    const value = (series: string) => Number(text.split('\n').find((line) => line.startsWith(`${series} `))?.split(' ')[1] ?? 0);
    return { argon2: value('gatehouse_argon2_verifications_total{result="match"}'), cacheHits: value('gatehouse_cache_lookups_total{tier="state",result="hit"}') };
  }

  /** Sends one request and says how its key was decided. */
  async function decided<T>(send: () => Promise<T>): Promise<{ result: T; decided: Decided }> {
    const before = await counters();
    const result = await send();
    const after = await counters();
    return { result, decided: { argon2: after.argon2 - before.argon2, cacheHits: after.cacheHits - before.cacheHits } };
  }

  const events = (agent: number) => `/api/v1/agents/${agent}/events`;

  it('a key\'s cold request (store read, argon2id) and its cached ones reach the upstream, and answer the client, identically', async () => {
    const { key } = await f.key({ scopes: ['events:write'], agent_id: 7 });
    const target = `${events(7)}?source=lane&x=%2F&y=a%20b`;
    const runs = [];
    for (let i = 0; i < 3; i++) {
      f.origin.clear();
      const { result, decided: how } = await decided(async () => {
        const response = await fetch(`${f.gateway.url}${target}`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            'x-custom': 'kept',
            'x-auth-kind': 'admin',
            'x-forwarded-for': '6.6.6.6',
          },
          body: '{"type":"call.ended","id":1}',
        });
        return { response, text: await response.text() };
      });
      expect(f.origin.received).toHaveLength(1);
      const [received] = f.origin.received;
      runs.push({ how, received: received!, response: result.response, text: result.text });
    }

    // The premise: the first is decided with argon2id, the next two from the cache, without a promise.
    expect(runs.map((run) => run.how)).toEqual([
      { argon2: 1, cacheHits: 0 },
      { argon2: 0, cacheHits: 1 },
      { argon2: 0, cacheHits: 1 },
    ]);
    const [cold, ...cached] = runs;
    expect(cold!.response.status).toBe(200);
    expect(cold!.received).toMatchObject({ method: 'POST', url: target, body: '{"type":"call.ended","id":1}' });
    expect(cold!.received.headers).toMatchObject({ 'x-auth-kind': 'api_key', 'x-auth-agent-id': '7', 'x-forwarded-for': '127.0.0.1', 'x-custom': 'kept' });
    for (const run of cached) {
      expect(upstreamView(run.received)).toEqual(upstreamView(cold!.received));
      expect(answerView(run.response, run.text)).toEqual(answerView(cold!.response, cold!.text));
    }
    // Only the request ids differ: one per request, the same at the upstream and in the answer.
    const ids = runs.map((run) => run.response.headers.get('x-request-id'));
    expect(new Set(ids).size).toBe(3);
    for (const run of runs) {
      expect(run.response.headers.get('x-request-id')).toMatch(UUID);
      expect(run.received.headers['x-request-id']).toBe(run.response.headers.get('x-request-id'));
    }
  });

  it('a cached key, once revoked, is refused 401 revoked_credential and nothing reaches the upstream', async () => {
    const { key, id } = await f.key({ scopes: ['events:write'] });
    const send = (requestId?: string) =>
      request(`${f.gateway.url}${events(1)}`, { method: 'POST', token: key, json: {}, headers: requestId === undefined ? {} : { 'x-request-id': requestId } });
    expect((await send()).status).toBe(200);
    const warm = await decided(() => send());
    expect(warm.result.status).toBe(200);
    expect(warm.decided).toEqual({ argon2: 0, cacheHits: 1 });

    expect((await request(`${f.gateway.url}/api/v1/api-keys/${id}`, { method: 'DELETE', token: f.admin })).status).toBe(204);
    f.origin.clear();
    // The first refusal reads the key's state again (after its eviction); the state is then
    // cached, so the next is refused from memory, by the same pipeline.
    const refusals = [await decided(() => send()), await decided(() => send('trace-revoked'))];
    expect(refusals.map((refusal) => refusal.decided.cacheHits)).toEqual([0, 1]);
    for (const { result: refused } of refusals) {
      expect(refused.status).toBe(401);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
      expect(refused.headers.get('www-authenticate')).toMatch(/^Bearer /);
      expect(refused.body).toMatchObject({ status: 401, code: 'revoked_credential' });
      expect(refused.headers.get('x-request-id')).toBe(refused.body.instance);
    }
    expect(refusals[0]!.result.body.instance).toMatch(UUID);
    expect(refusals[1]!.result.body.instance).toBe('trace-revoked');
    expect(f.origin.received).toEqual([]);
  });

  describe('the gateway\'s own paths are never forwarded, whatever the cached credential may reach upstream', () => {
    let key: string;

    beforeAll(async () => {
      ({ key } = await f.key({ scopes: ['events:write'] }));
      // Warm both credentials: the key on its route, the admin token on an upstream admin path (the route table's /**).
      f.origin.clear();
      expect((await request(`${f.gateway.url}${events(1)}`, { method: 'POST', token: key, json: {} })).status).toBe(200);
      expect((await request(`${f.gateway.url}/dashboard`, { token: f.admin })).status).toBe(200);
      expect(f.origin.received).toHaveLength(2);
    });

    // [description, method, path, credential, status, code of the refusal]
    const own: Array<[string, string, string, 'admin' | 'key', number, string | undefined]> = [
      ['PUT /api/v1/api-keys, an API key', 'PUT', '/api/v1/api-keys', 'key', 405, 'method_not_allowed'],
      ['PUT /api/v1/api-keys, the admin token', 'PUT', '/api/v1/api-keys', 'admin', 405, 'method_not_allowed'],
      ['GET /api/v1/api-keys, the admin token (the list)', 'GET', '/api/v1/api-keys', 'admin', 200, undefined],
      ['HEAD /api/v1/api-keys, the admin token', 'HEAD', '/api/v1/api-keys', 'admin', 200, undefined],
      ['GET /api/v1/api-keys, an API key', 'GET', '/api/v1/api-keys', 'key', 401, 'wrong_credential_type'],
      ['PUT /api/v1/api-keys/1, the admin token', 'PUT', '/api/v1/api-keys/1', 'admin', 405, 'method_not_allowed'],
      ['GET /api/v1/auth/login, the admin token', 'GET', '/api/v1/auth/login', 'admin', 405, 'method_not_allowed'],
      ['GET /api/v1/audit-events, the admin token', 'GET', '/api/v1/audit-events', 'admin', 200, undefined],
      ['GET /api/v1/openapi.json, the admin token', 'GET', '/api/v1/openapi.json', 'admin', 200, undefined],
      ['POST /docs, the admin token', 'POST', '/docs', 'admin', 405, 'method_not_allowed'],
      ['PUT /docs/, the admin token', 'PUT', '/docs/', 'admin', 405, 'method_not_allowed'],
      ['DELETE /docs/js/scalar.js, the admin token', 'DELETE', '/docs/js/scalar.js', 'admin', 405, 'method_not_allowed'],
    ];

    it.each(own)('%s: %s %s is answered by the gateway', async (_what, method, path, credential, status, code) => {
      f.origin.clear();
      const response = await request(`${f.gateway.url}${path}`, { method, token: credential === 'admin' ? f.admin : key });
      expect(response.status).toBe(status);
      if (code !== undefined) {
        expect(response.headers.get('content-type')).toContain('application/problem+json');
        expect(response.body).toMatchObject({ status, code });
        expect(response.headers.get('x-request-id')).toBe(response.body.instance);
      }
      if (status === 405) expect(response.headers.get('allow')).toBeTruthy();
      expect(response.headers.get('x-origin')).toBeNull();
      expect(f.origin.received).toEqual([]);
    });

    it('a path below /docs that the gateway does not serve is reserved all the same: 404, never the upstream', async () => {
      f.origin.clear();
      const response = await request(`${f.gateway.url}/docs/x`, { token: f.admin });
      expect(response.status).toBe(404);
      expect(response.body).toMatchObject({ status: 404, code: 'not_found' });
      expect(response.headers.get('x-origin')).toBeNull();
      expect(f.origin.received).toEqual([]);
    });
  });

  it('a client\'s x-request-id on a cached request reaches the upstream and comes back', async () => {
    const { key } = await f.key({ scopes: ['events:write'] });
    expect((await request(`${f.gateway.url}${events(3)}`, { method: 'POST', token: key, json: {} })).status).toBe(200);
    f.origin.clear();
    const { result: response, decided: how } = await decided(() =>
      request(`${f.gateway.url}${events(3)}`, { method: 'POST', token: key, json: {}, headers: { 'x-request-id': 'trace-123' } }),
    );
    expect(how).toEqual({ argon2: 0, cacheHits: 1 });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-request-id')).toBe('trace-123');
    expect(f.origin.received).toHaveLength(1);
    expect(f.origin.received[0]!.headers['x-request-id']).toBe('trace-123');
  });
});
