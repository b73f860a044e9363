import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { JSON_POST, KEY_A, KEY_B, TestServer, bearer, bench, headerOf, rpcErrorOf, until, type BenchOptions } from './support.ts';

const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } });
const TOOLS_LIST = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
const OK = JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} });

/** The session check and booking (session-gate.ts), between reading the request and relaying it, against the fake upstream. */
describe('SessionGate', () => {
  const server = new TestServer();
  let parts: ReturnType<typeof bench>;

  const start = (options: BenchOptions = {}) => {
    parts = bench(options);
    server.handle = (request, response) => {
      const transport = request.url!.startsWith('/sse') ? 'sse' : request.url!.startsWith('/messages') ? 'messages' : 'streamable';
      const exchange = parts.exchangeOf(request, response, transport);
      const forward = parts.relay.forward.bind(parts.relay);
      parts.replies.guarded(exchange, (read) => parts.reading.read(read, (checked) => parts.sessions.check(checked, forward)));
    };
  };

  beforeAll(() => server.start());
  afterAll(() => server.close());
  beforeEach(() => start());

  it('refuses a session bound to another key with 403 session_mismatch; nothing upstream, the binding kept', async () => {
    await parts.bindings.bind('streamable:s-1', 2);
    const answer = await server.call('POST', '/mcp', { ...bearer(KEY_A), ...JSON_POST, 'mcp-session-id': 's-1' }, TOOLS_LIST);
    expect(answer.status).toBe(403);
    expect(rpcErrorOf(answer.text)).toEqual({ id: 2, code: -32003, dataCode: 'session_mismatch', status: 403 });
    expect(parts.upstream.received).toEqual([]);
    expect(await parts.bindings.check('streamable:s-1', 2)).toBe('bound');
    expect(parts.observed).toMatchObject([{ allowed: false, code: 'session_mismatch' }]);
  });

  it('refuses an unknown session with 404 (-32001, as MCP servers answer), so the client initializes again', async () => {
    const answer = await server.call('GET', '/mcp', { ...bearer(KEY_A), 'mcp-session-id': 'gone' });
    expect(answer.status).toBe(404);
    expect(rpcErrorOf(answer.text)).toEqual({ id: null, code: -32001, dataCode: 'not_found', status: 404 });
    expect(parts.upstream.received).toEqual([]);
  });

  it('refuses two Mcp-Session-Id headers, whichever the upstream would read', async () => {
    const answer = await server.call('DELETE', '/mcp', { ...bearer(KEY_A), 'mcp-session-id': ['s-1', 's-2'] });
    expect(answer.status).toBe(400);
    expect(rpcErrorOf(answer.text).dataCode).toBe('duplicate_header');
    expect(parts.upstream.received).toEqual([]);
  });

  it('forwards a session bound to the key, with its id', async () => {
    await parts.bindings.bind('streamable:s-1', 1);
    parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, result: { tools: [] } }) });
    const answer = await server.call('POST', '/mcp', { ...bearer(KEY_A), ...JSON_POST, 'mcp-session-id': 's-1' }, TOOLS_LIST);
    expect(answer.status).toBe(200);
    expect(headerOf(parts.upstream.received[0]!.headers, 'mcp-session-id')).toEqual(['s-1']);
  });

  it('binds the session id the upstream issues to the key that opened it', async () => {
    parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'application/json', 'mcp-session-id': 'new-1' }, body: OK });
    const answer = await server.call('POST', '/mcp', { ...bearer(KEY_A), ...JSON_POST }, INITIALIZE);
    expect(answer.status).toBe(200);
    expect(answer.headers['mcp-session-id']).toBe('new-1');
    expect(JSON.parse(answer.text)).toEqual(JSON.parse(OK));
    expect(await parts.bindings.check('streamable:new-1', 1)).toBe('bound');
    const other = await server.call('POST', '/mcp', { ...bearer(KEY_B), ...JSON_POST, 'mcp-session-id': 'new-1' }, TOOLS_LIST);
    expect(other.status).toBe(403);
  });

  it('binds the session id of an event-stream answer before the stream is passed on', async () => {
    parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'text/event-stream', 'mcp-session-id': 'new-2' }, body: [`event: message\ndata: ${OK}\n\n`] });
    const answer = await server.call('POST', '/mcp', { ...bearer(KEY_A), ...JSON_POST }, INITIALIZE);
    expect(answer.status).toBe(200);
    expect(answer.text).toBe(`event: message\ndata: ${OK}\n\n`);
    expect(await parts.bindings.check('streamable:new-2', 1)).toBe('bound');
  });

  it('answers 502 when the upstream issues a session id that cannot be bound', async () => {
    parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'application/json', 'mcp-session-id': 'has space' }, body: OK });
    const answer = await server.call('POST', '/mcp', { ...bearer(KEY_A), ...JSON_POST }, INITIALIZE);
    expect(answer.status).toBe(502);
    expect(answer.headers['mcp-session-id']).toBeUndefined();
    expect(rpcErrorOf(answer.text)).toEqual({ id: null, code: -32000, dataCode: 'upstream_unavailable', status: 502 });
    expect(parts.lines).toMatchObject([{ level: 'error', message: 'MCP request failed' }]);
  });

  it('unbinds a session its DELETE ended', async () => {
    await parts.bindings.bind('streamable:s-1', 1);
    parts.upstream.answer = () => ({ status: 200, headers: { 'content-length': '0' } });
    const answer = await server.call('DELETE', '/mcp', { ...bearer(KEY_A), 'mcp-session-id': 's-1' });
    expect(answer.status).toBe(200);
    expect(parts.upstream.received).toMatchObject([{ method: 'DELETE', body: null }]);
    expect(await parts.bindings.check('streamable:s-1', 1)).toBe('unknown');
  });

  it('unbinds a session the upstream answers 404 for', async () => {
    await parts.bindings.bind('streamable:s-1', 1);
    parts.upstream.answer = () => ({ status: 404, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'no' } }) });
    const answer = await server.call('POST', '/mcp', { ...bearer(KEY_A), ...JSON_POST, 'mcp-session-id': 's-1' }, TOOLS_LIST);
    expect(answer.status).toBe(404);
    expect(await parts.bindings.check('streamable:s-1', 1)).toBe('unknown');
  });

  it('binds the legacy session its endpoint event names, refuses it to another key, and ends it with the stream', async () => {
    const events = new PassThrough();
    parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: events });
    const stream = await server.open('GET', '/sse', bearer(KEY_A));
    events.write('event: endpoint\ndata: /messages?sessionId=abc\n\n');
    const first = await new Promise<string>((resolve) => stream.once('data', (chunk: Buffer) => resolve(chunk.toString())));
    expect(first).toBe('event: endpoint\ndata: /messages?sessionId=abc\n\n');
    expect(await parts.bindings.check('legacy:abc', 1)).toBe('bound');

    const other = await server.call('POST', '/messages?sessionId=abc', { ...bearer(KEY_B), ...JSON_POST }, TOOLS_LIST);
    expect(other.status).toBe(403);
    expect(rpcErrorOf(other.text).dataCode).toBe('session_mismatch');

    events.end();
    stream.resume();
    await new Promise((resolve) => stream.once('end', resolve));
    await until(() => parts.bindings.size === 0);
  });

  it('keeps the session of an open stream bound, and stops once the stream ends', async () => {
    // The refresh's interval on a clock the test moves; the sockets keep their own timers.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    onTestFinished(() => void vi.useRealTimers());
    start({ streamBindingRefreshMs: 10 });
    await parts.bindings.bind('streamable:s-1', 1);
    const checks: string[] = [];
    const check = parts.bindings.check.bind(parts.bindings);
    parts.bindings.check = (session, keyId) => {
      checks.push(session);
      return check(session, keyId);
    };
    const events = new PassThrough();
    parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: events });
    const stream = await server.open('GET', '/mcp', { ...bearer(KEY_A), 'mcp-session-id': 's-1' });
    await until(() => {
      vi.advanceTimersByTime(10);
      return checks.length >= 3;
    });
    events.end();
    stream.resume();
    await new Promise((resolve) => stream.once('end', resolve));
    // Stopped once the gateway has seen the stream end: ten refresh periods pass with no check more.
    await until(() => {
      const before = checks.length;
      vi.advanceTimersByTime(100);
      return checks.length === before;
    });
    expect(new Set(checks)).toEqual(new Set(['streamable:s-1']));
  });
});
