import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

/** One decision on one path, and exactly that path forwarded: anything ambiguous is a 400. */
describe('attack: ambiguous request targets', () => {
  let f: ProxyFixture;
  let bound: string;

  beforeAll(async () => {
    f = await startProxyFixture();
    bound = (await f.key({ scopes: ['events:write'], agent_id: 2 })).key;
  });
  afterAll(async () => {
    await f?.close();
  });

  const get = (target: string, token: string) =>
    rawRequest(f.port, `POST ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Length: 0\r\n\r\n`);

  it.each([
    ['a dot-dot segment to another agent', '/api/v1/agents/2/../3/events'],
    ['a dot-dot to an admin path', '/api/v1/agents/2/events/../../../../dashboard'],
    ['a dot segment', '/api/v1/agents/./2/events'],
    ['encoded dots', '/api/v1/agents/2/%2e%2e/3/events'],
    ['upper-case encoded dots', '/api/v1/agents/2/%2E%2E/3/events'],
    ['encoded slashes', '/api/v1/agents/2%2f..%2f3/events'],
    ['an encoded slash in the agent id', '/api/v1/agents/3%2F/events'],
    ['encoded backslashes', '/api/v1/agents/2%5c..%5c3/events'],
    ['a raw backslash', '/api/v1/agents/2\\..\\3/events'],
    ['an encoded NUL', '/api/v1/agents/2%00/events'],
    ['a matrix parameter', '/api/v1/agents/2;3/events'],
    ['a parameter on the last segment', '/api/v1/agents/2/events;x'],
    ['a double slash', '/api/v1/agents//2/events'],
    ['a leading double slash', '//api/v1/agents/2/events'],
    ['an absolute-form target', 'http://127.0.0.1/api/v1/agents/2/events'],
    ['an absolute-form target to another host', 'http://evil.example/api/v1/agents/2/events'],
    ['a fragment', '/api/v1/agents/2/events#frag'],
    ['an encoded agent digit', '/api/v1/agents/%32/events'],
    ['an encoded letter', '/api/v1/agents/2/%65vents'],
    ['a broken escape', '/api/v1/agents/2/events%'],
  ])('refuses %s with 400 and forwards nothing', async (_what, target) => {
    f.origin.clear();
    const response = await get(target, bound);
    expect(response.status).toBe(400);
    expect(response.headers['content-type']).toContain('application/problem+json');
    expect(f.origin.received).toHaveLength(0);
  });

  it.each([
    ['02', 400],
    ['+2', 400],
    ['2.0', 400],
    [' 2', 400],
  ])('refuses the non-canonical agent id %j', async (agent, status) => {
    f.origin.clear();
    const response = await get(`/api/v1/agents/${agent}/events`, bound);
    expect(response.status).toBe(status);
    expect(f.origin.received).toHaveLength(0);
  });

  it('forwards exactly the path it authorized, query string included', async () => {
    f.origin.clear();
    const response = await get('/api/v1/agents/2/events?next=%2F..%2Fadmin&a=1&a=2', bound);
    expect(response.status).toBe(200);
    expect(f.origin.received).toHaveLength(1);
    expect(f.origin.received[0]!.url.split('?')[0]).toBe('/api/v1/agents/2/events');
  });

  it('a trailing slash is another path: the events rule does not apply and an API key is refused', async () => {
    f.origin.clear();
    const response = await get('/api/v1/agents/2/events/', bound);
    expect(response.status).toBe(401);
    expect(f.origin.received).toHaveLength(0);
  });

  it('paths are case-sensitive: an upper-case events path is an admin path', async () => {
    f.origin.clear();
    const response = await get('/API/v1/agents/2/events', bound);
    expect(response.status).toBe(401);
    expect(f.origin.received).toHaveLength(0);
  });
});
