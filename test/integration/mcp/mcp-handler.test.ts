import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMcpHandler, type McpHandler } from '../../../src/mcp/mcp-handler.ts';
import { JSON_POST, KEY_A, TestServer, bearer, bench, headerOf, rpcErrorOf } from './support.ts';

const rpc = (id: number, method: string, params?: unknown) => JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });

/** The handler composed of the parts (mcp-handler.ts): the credential first, then each step, against the fake upstream. */
describe('createMcpHandler', () => {
  const server = new TestServer();
  let parts: ReturnType<typeof bench>;
  let handler: McpHandler;

  beforeAll(() => server.start());
  afterAll(() => server.close());
  beforeEach(() => use(bench()));

  /** The handler on these parts, serving the test server. */
  function use(made: ReturnType<typeof bench>): void {
    parts = made;
    handler = createMcpHandler({
      upstream: parts.upstream.asUpstream(),
      forwardAuthorization: false,
      bodyLimit: 1024,
      tables: parts.tables,
      licence: parts.licence,
      pipeline: parts.pipeline,
      grants: parts.grants,
      toolHeaders: parts.toolHeaders,
      identity: parts.identity,
      bindings: parts.bindings,
      log: parts.log,
      streams: parts.streams,
    });
    server.handle = (request, response) => handler.serve(request, response, 'req-9', new URL(request.url!, 'http://gateway.test').pathname);
  }

  it('serves the MCP paths of the route table, and refuses an upgrade on them', () => {
    expect([...handler.paths].sort()).toEqual(['/mcp', '/messages', '/sse']);
    expect(handler.serves('/mcp')).toBe(true);
    expect(handler.serves('/api/v1/agents/7/events')).toBe(false);
    expect(handler.upgradeRefusal()).toMatchObject({ allow: false, code: 'bad_request', status: 400 });
  });

  it.each([
    ['no credential', {}, 401, 'missing_credential'],
    ['an unknown key', bearer('ghk_unknown'), 401, 'invalid_credential'],
  ])('refuses %s as problem+json before reading the body; nothing upstream', async (_what, headers, status, code) => {
    const answer = await server.call('POST', '/mcp', { ...headers, ...JSON_POST }, rpc(1, 'ping'));
    expect(answer.status).toBe(status);
    expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(answer.text)).toMatchObject({ code });
    expect(parts.upstream.received).toEqual([]);
    expect(parts.observed).toMatchObject([{ allowed: false, code }]);
  });

  it('refuses a method the route does not list before the key is looked at', async () => {
    const answer = await server.call('PUT', '/mcp', bearer(KEY_A));
    expect(answer.status).toBe(405);
    expect(answer.headers.allow).toBe('DELETE, GET, POST');
    expect(parts.upstream.received).toEqual([]);
  });

  it('runs a session: bound on initialize, tools filtered, a forbidden call refused, unbound on DELETE; each request observed once', async () => {
    parts.upstream.answer = (request) => {
      if (request.method === 'DELETE') return { status: 204, headers: {} };
      const { id, method } = JSON.parse(request.body as string) as { id: number; method: string };
      if (method === 'initialize') return { status: 200, headers: { 'content-type': 'application/json', 'mcp-session-id': 'sess-1' }, body: JSON.stringify({ jsonrpc: '2.0', id, result: {} }) };
      const tools = [{ name: 'list_agents' }, { name: 'place_outbound_call' }];
      return { status: 200, headers: { 'content-type': 'text/event-stream' }, body: [`data: ${JSON.stringify({ jsonrpc: '2.0', id, result: { tools } })}\n\n`] };
    };
    const headers = { ...bearer(KEY_A), ...JSON_POST };

    const opened = await server.call('POST', '/mcp', headers, rpc(1, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } }));
    expect(opened.status).toBe(200);
    expect(opened.headers['mcp-session-id']).toBe('sess-1');
    expect(await parts.bindings.check('streamable:sess-1', 1)).toBe('bound');

    const session = { ...headers, 'mcp-session-id': 'sess-1' };
    const listed = await server.call('POST', '/mcp', session, rpc(2, 'tools/list'));
    expect(listed.text).toBe(`data: ${JSON.stringify({ jsonrpc: '2.0', id: 2, result: { tools: [{ name: 'list_agents' }] } })}\n\n`);

    const refused = await server.call('POST', '/mcp', session, rpc(3, 'tools/call', { name: 'place_outbound_call', arguments: {} }));
    expect(refused.status).toBe(403);
    expect(rpcErrorOf(refused.text)).toMatchObject({ id: 3, dataCode: 'insufficient_scope' });

    const ended = await server.call('DELETE', '/mcp', { ...bearer(KEY_A), 'mcp-session-id': 'sess-1' });
    expect(ended.status).toBe(204);
    expect(await parts.bindings.check('streamable:sess-1', 1)).toBe('unknown');

    expect(parts.upstream.received.map((request) => request.method)).toEqual(['POST', 'POST', 'DELETE']);
    expect(headerOf(parts.upstream.received[1]!.headers, 'x-request-id')).toEqual(['req-9']);
    expect(parts.observed.map(({ allowed, code, route }) => [allowed, code, route])).toEqual([
      [true, undefined, 'mcp'],
      [true, undefined, 'mcp'],
      [false, 'insufficient_scope', 'mcp'],
      [true, undefined, 'mcp'],
    ]);
  });

  it('a key past its rate limit or its tool\'s: 429 as a JSON-RPC error with Retry-After, nothing forwarded; every answer tells the limits', async () => {
    use(bench({ keyRateLimit: { requests: 3, perSeconds: 60 }, toolLimits: { list_agents: { requests: 1, per_seconds: 60 } } }));
    // The upstream's own fields of these names would contradict the gateway's: they are not passed on.
    parts.upstream.answer = (request) => {
      const { id } = JSON.parse(request.body as string) as { id: number };
      return { status: 200, headers: { 'content-type': 'application/json', ratelimit: '"upstream";r=999;t=1' }, body: JSON.stringify({ jsonrpc: '2.0', id, result: {} }) };
    };
    const headers = { ...bearer(KEY_A), ...JSON_POST };
    const first = await server.call('POST', '/mcp', headers, rpc(1, 'tools/call', { name: 'list_agents', arguments: {} }));
    expect(first.status).toBe(200);
    expect(first.headers['ratelimit-policy']).toBe('"key";q=3;w=60, "tool:list_agents";q=1;w=60');
    expect(first.headers.ratelimit).toBe('"key";r=2;t=60, "tool:list_agents";r=0;t=60');

    const tool = await server.call('POST', '/mcp', headers, rpc(2, 'tools/call', { name: 'list_agents', arguments: {} }));
    expect(tool.status).toBe(429);
    expect(tool.headers['retry-after']).toBe('60');
    expect(tool.headers.ratelimit).toBe('"key";r=2;t=60, "tool:list_agents";r=0;t=60');
    expect(JSON.parse(tool.text)).toMatchObject({ id: 2, error: { data: { code: 'rate_limited', status: 429, retry_after: 60 } } });

    // The key's own limit, still with two left: another method takes them.
    expect((await server.call('POST', '/mcp', headers, rpc(3, 'ping'))).status).toBe(200);
    expect((await server.call('POST', '/mcp', headers, rpc(4, 'ping'))).headers.ratelimit).toBe('"key";r=0;t=60');
    const key = await server.call('POST', '/mcp', headers, rpc(5, 'ping'));
    expect(key.status).toBe(429);
    expect(key.headers['ratelimit-policy']).toBe('"key";q=3;w=60');
    expect(JSON.parse(key.text)).toMatchObject({ id: 5, error: { data: { code: 'rate_limited', detail: "The API key's rate limit is reached (3 per 60 s)" } } });
    expect(parts.upstream.received.map((request) => JSON.parse(request.body as string).id)).toEqual([1, 3, 4]);
    expect(parts.observed.map((o) => o.code)).toEqual([undefined, 'rate_limited', undefined, undefined, 'rate_limited']);
  });

  it('a refusal before the body is read still tells the key\'s limit, counting nothing', async () => {
    use(bench({ keyRateLimit: { requests: 3, perSeconds: 60 } }));
    const answer = await server.call('POST', '/mcp', { ...bearer(KEY_A), ...JSON_POST, origin: 'https://evil.example' }, rpc(1, 'ping'));
    expect(answer.status).toBe(403);
    expect(answer.headers.ratelimit).toBeUndefined();
    const refusedGet = await server.call('GET', '/mcp', { ...bearer(KEY_A), 'mcp-protocol-version': '1999-01-01' });
    expect(refusedGet.status).toBe(400);
    // The version is decided at the exchange, before the limit: nothing counted, the limit shown whole.
    expect(refusedGet.headers.ratelimit).toBe('"key";r=3;t=0');
    // So is a body the gateway cannot read as JSON-RPC, refused before anything is decided of it.
    const unreadable = await server.call('POST', '/mcp', { ...bearer(KEY_A), ...JSON_POST, 'content-type': 'text/plain' }, rpc(1, 'ping'));
    expect(unreadable.status).toBe(415);
    expect(unreadable.headers.ratelimit).toBe('"key";r=3;t=0');
    expect(unreadable.headers['ratelimit-policy']).toBe('"key";q=3;w=60');
    expect(parts.upstream.received).toEqual([]);
  });

  it('a request refused for its session counts nothing: the limits are counted last', async () => {
    use(bench({ keyRateLimit: { requests: 3, perSeconds: 60 } }));
    parts.upstream.answer = (request) => {
      const { id } = JSON.parse(request.body as string) as { id: number };
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id, result: {} }) };
    };
    const headers = { ...bearer(KEY_A), ...JSON_POST };
    await parts.bindings.bind('streamable:sess-of-b', 2);
    for (const session of ['sess-unknown', 'sess-of-b', 'sess-unknown']) {
      const refused = await server.call('POST', '/mcp', { ...headers, 'mcp-session-id': session }, rpc(1, 'ping'));
      expect(refused.status).toBe(session === 'sess-of-b' ? 403 : 404);
      expect(refused.headers.ratelimit).toBe('"key";r=3;t=0');
    }
    const counted = await server.call('POST', '/mcp', headers, rpc(2, 'ping'));
    expect(counted.status).toBe(200);
    expect(counted.headers.ratelimit).toBe('"key";r=2;t=60');
    expect(parts.upstream.received).toHaveLength(1);
  });
});
