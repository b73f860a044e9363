import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { parseJsonRpcBody } from '../../../src/mcp/json-rpc-body.ts';
import { KEY_A, TestServer, bearer, bench, rpcErrorOf, until, type BenchOptions } from './support.ts';

const TOOLS_LIST = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
const TOOLS = [{ name: 'list_agents' }, { name: 'place_outbound_call' }, { name: 'get_agent_status' }];
const LIST = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: TOOLS } });
const FILTERED = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'list_agents' }, { name: 'get_agent_status' }] } });

/** Relaying and filtering the answer (answer-relay.ts, event-stream-relay.ts): an exchange already read and checked, sent to the fake upstream. */
describe('AnswerRelay', () => {
  const server = new TestServer();
  let parts: ReturnType<typeof bench>;
  /** The body the exchange was read with (as RequestReading leaves it), for the next request. */
  let posted: string | undefined;

  const start = (options: BenchOptions = {}) => {
    parts = bench(options);
    server.handle = (request, response) => {
      const exchange = parts.exchangeOf(request, response);
      if (posted !== undefined) exchange.body = parseJsonRpcBody(Buffer.from(posted));
      parts.replies.guarded(exchange, (forward) => parts.relay.forward(forward));
    };
  };

  beforeAll(() => server.start());
  afterAll(() => server.close());
  beforeEach(() => {
    posted = TOOLS_LIST;
    start();
  });

  it('filters a JSON tools/list answer to the key\'s tools', async () => {
    parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'application/json; charset=utf-8', 'x-upstream': 'kept' }, body: LIST });
    const answer = await server.call('POST', '/mcp', bearer(KEY_A));
    expect(answer.status).toBe(200);
    expect(answer.text).toBe(FILTERED);
    expect(answer.headers).toMatchObject({ 'content-type': 'application/json', 'x-upstream': 'kept', 'x-request-id': 'req-1' });
    expect(parts.upstream.received).toMatchObject([{ method: 'POST', path: '/mcp', body: TOOLS_LIST, stream: false }]);
    expect(parts.observed).toMatchObject([{ allowed: true }]);
  });

  it.each([
    ['a JSON tools list, taken over', { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'public, max-age=300' }, body: LIST }],
    ['an event stream, taken over', { status: 200, headers: { 'content-type': 'text/event-stream', 'cache-control': 'public, max-age=300' }, body: [`data: ${LIST}\n\n`] }],
    ['an answer without a body, passed on as it comes', { status: 204, headers: { 'cache-control': 'public, max-age=300', 'x-upstream': 'kept' } }],
  ])('%s: the gateway\'s Cache-Control replaces the upstream\'s', async (_what, canned) => {
    parts.upstream.answer = () => canned;
    const answer = await server.call('POST', '/mcp', bearer(KEY_A));
    expect(answer.status).toBe(canned.status);
    expect(answer.headers['cache-control']).toBe('no-store, no-transform');
  });

  it('filters a tools/list answer in an event stream, event by event, and drops an event it cannot check', async () => {
    parts.upstream.answer = () => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream', 'content-length': '999' },
      body: ['event: message\nid: 1\ndata: ', `${LIST}\n\n`, 'data: {"not json\n\n'],
    });
    const answer = await server.call('POST', '/mcp', bearer(KEY_A));
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toBe('text/event-stream');
    expect(answer.headers['content-length']).toBeUndefined();
    expect(answer.text).toBe(`event: message\nid: 1\ndata: ${FILTERED}\n\n`);
    expect(parts.lines).toMatchObject([{ level: 'warn', message: 'An event of the upstream was not passed on' }]);
  });

  it('refuses a tools list answering a request that was not tools/list', async () => {
    posted = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: LIST });
    const answer = await server.call('POST', '/mcp', bearer(KEY_A));
    expect(answer.status).toBe(502);
    expect(answer.text).not.toContain('place_outbound_call');
  });

  it('answers an upstream failure as a JSON-RPC error 502, logged', async () => {
    parts.upstream.answer = () => ({ fail: new GatewayError('upstream_unavailable', 'The upstream cannot be reached') });
    const answer = await server.call('POST', '/mcp', bearer(KEY_A));
    expect(answer.status).toBe(502);
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(rpcErrorOf(answer.text)).toEqual({ id: null, code: -32000, dataCode: 'upstream_unavailable', status: 502 });
    expect(parts.lines).toMatchObject([{ level: 'error', message: 'MCP request failed', object: { reqId: 'req-1' } }]);
    expect(parts.observed).toMatchObject([{ allowed: true }]);
  });

  it.each([
    ['an answer larger than it inspects', { 'content-type': 'application/json' }, JSON.stringify({ jsonrpc: '2.0', id: 1, result: { text: 'x'.repeat(200) } })],
    ['a type it does not read', { 'content-type': 'text/html' }, '<p>hi</p>'],
    ['an encoded event stream', { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' }, 'data: {}\n\n'],
  ])('answers %s with 502, none of it passed on', async (_what, headers, body) => {
    start({ maxFiltered: 100 });
    parts.upstream.answer = () => ({ status: 200, headers, body });
    const answer = await server.call('POST', '/mcp', bearer(KEY_A));
    expect(answer.status).toBe(502);
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect(rpcErrorOf(answer.text).dataCode).toBe('upstream_unavailable');
  });

  it('relays an answer without a body as it comes', async () => {
    parts.upstream.answer = () => ({ status: 202, headers: { 'x-upstream': 'kept' } });
    const answer = await server.call('POST', '/mcp', bearer(KEY_A));
    expect(answer.status).toBe(202);
    expect(answer.headers['x-upstream']).toBe('kept');
    expect(answer.text).toBe('');
  });

  describe('a GET\'s event stream', () => {
    const streamOf = async (): Promise<{ response: IncomingMessage; events: PassThrough }> => {
      const events = new PassThrough();
      parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: events });
      const response = await server.open('GET', '/mcp', bearer(KEY_A));
      return { response, events };
    };

    beforeEach(() => {
      posted = undefined;
      start({ maxStreamsPerKey: 1 });
    });

    it('is booked against the key\'s stream cap, sent on the streams\' connections, and released when it ends', async () => {
      const { response } = await streamOf();
      expect(response.statusCode).toBe(200);
      expect(parts.upstream.received).toMatchObject([{ method: 'GET', body: null, stream: true }]);
      expect(parts.streams.size).toBe(1);

      const second = await server.call('GET', '/mcp', bearer(KEY_A));
      expect(second.status).toBe(429);
      expect(rpcErrorOf(second.text).dataCode).toBe('too_many_streams');
      expect(parts.upstream.received).toHaveLength(1);
      expect(parts.observed).toMatchObject([{ allowed: true }, { allowed: false, code: 'too_many_streams' }]);

      response.destroy();
      await until(() => parts.streams.size === 0);
    });

    it('is cut when its key ends', async () => {
      const { response } = await streamOf();
      const closed = new Promise((resolve) => response.once('close', resolve));
      response.resume();
      parts.streams.closeKey(1);
      await closed;
      await until(() => parts.streams.size === 0);
    });

    it('leaves room for a POST answered with a stream: cut with the key, not counted', async () => {
      await streamOf();
      posted = TOOLS_LIST;
      const events = new PassThrough();
      parts.upstream.answer = () => ({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: events });
      const post = await server.open('POST', '/mcp', bearer(KEY_A));
      expect(post.statusCode).toBe(200);
      expect(parts.streams.size).toBe(2);
      const ended = new Promise((resolve) => post.once('close', resolve));
      post.resume();
      parts.streams.closeKey(1);
      await ended;
      await until(() => parts.streams.size === 0);
    });
  });
});
