import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BODY_LIMIT, JSON_POST, KEY_A, TestServer, bearer, bench, headerOf, rpcErrorOf, until } from './support.ts';

/** Reading and deciding the request (request-reading.ts), handing on to the relay, against the fake upstream. */
describe('RequestReading', () => {
  const server = new TestServer();
  let parts: ReturnType<typeof bench>;
  let handled = 0;

  beforeAll(() => server.start());
  afterAll(() => server.close());
  beforeEach(() => {
    parts = bench();
    handled = 0;
    server.handle = (request, response) => {
      handled++;
      const exchange = parts.exchangeOf(request, response);
      parts.replies.guarded(exchange, (read) => parts.reading.read(read, (next) => parts.relay.forward(next)));
    };
  });

  const post = (body: string | string[], headers: Record<string, string> = {}) => server.call('POST', '/mcp', { ...bearer(KEY_A), ...JSON_POST, ...headers }, body);

  it('refuses a tools/call the key may not make: a JSON-RPC error answering its id, nothing upstream', async () => {
    const answer = await post(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'place_outbound_call', arguments: {} } }));
    expect(answer.status).toBe(403);
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(answer.headers['x-request-id']).toBe('req-1');
    expect(rpcErrorOf(answer.text)).toEqual({ id: 5, code: -32003, dataCode: 'insufficient_scope', status: 403 });
    expect(parts.upstream.received).toEqual([]);
    expect(parts.observed).toMatchObject([{ allowed: false, code: 'insufficient_scope', route: 'mcp', credential: 'api_key' }]);
  });

  it('refuses a whole batch for one refused message: every request in it answered, nothing upstream', async () => {
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'place_outbound_call' } },
    ];
    const answer = await post(JSON.stringify(batch));
    expect(answer.status).toBe(403);
    const answers = JSON.parse(answer.text) as Array<{ id: number; error: { message: string; data: { code: string } } }>;
    expect(answers.map((each) => [each.id, each.error.data.code])).toEqual([
      [1, 'insufficient_scope'],
      [2, 'insufficient_scope'],
    ]);
    expect(answers[0]!.error.message).toMatch(/^Not forwarded: message 1 of the batch was refused/);
    expect(parts.upstream.received).toEqual([]);
  });

  it('forwards an allowed batch re-serialised, with the identity headers and nothing of the client\'s framing', async () => {
    const raw = '[ {"jsonrpc":"2.0","id":1,"method":"tools/list"} ,\n  {"jsonrpc":"2.0","method":"notifications/initialized"} ]';
    const answer = await server.call('POST', '/mcp?probe=1', { ...bearer(KEY_A), 'content-type': 'application/json; charset=utf-8', 'x-auth-key-id': '99' }, raw);
    expect(answer.status).toBe(202);
    expect(parts.upstream.received).toHaveLength(1);
    const sent = parts.upstream.received[0]!;
    expect(sent).toMatchObject({ method: 'POST', path: '/mcp?probe=1', route: 'mcp', stream: false });
    expect(sent.body).toBe(JSON.stringify(JSON.parse(raw)));
    expect(headerOf(sent.headers, 'content-type')).toEqual(['application/json']);
    expect(headerOf(sent.headers, 'accept-encoding')).toEqual(['identity']);
    expect(headerOf(sent.headers, 'content-length')).toEqual([]);
    expect(headerOf(sent.headers, 'authorization')).toEqual([]);
    expect(headerOf(sent.headers, 'x-auth-kind')).toEqual(['api_key']);
    expect(headerOf(sent.headers, 'x-auth-key-id')).toEqual(['1']);
    expect(headerOf(sent.headers, 'x-auth-agent-id')).toEqual(['7']);
    expect(headerOf(sent.headers, 'x-auth-scopes')).toEqual(['mcp:agents']);
    expect(headerOf(sent.headers, 'x-request-id')).toEqual(['req-1']);
    expect(parts.observed).toMatchObject([{ allowed: true, code: undefined, route: 'mcp' }]);
  });

  it.each([
    ['declared', { 'content-length': String(BODY_LIMIT + 100) }, ['x'.repeat(BODY_LIMIT + 100)]],
    ['chunked', {}, ['x'.repeat(BODY_LIMIT), 'x'.repeat(100)]],
  ])('answers a body over the limit (%s) with 413 and closes the connection; nothing upstream', async (_how, headers, body) => {
    const answer = await post(body, headers);
    expect(answer.status).toBe(413);
    expect(answer.headers.connection).toBe('close');
    expect(rpcErrorOf(answer.text)).toEqual({ id: null, code: -32600, dataCode: 'payload_too_large', status: 413 });
    expect(parts.upstream.received).toEqual([]);
    expect(parts.observed).toMatchObject([{ allowed: false, code: 'payload_too_large' }]);
  });

  it.each([
    ['not JSON', '{"jsonrpc":', JSON_POST, 400, 'bad_request', -32700],
    ['a duplicate key', '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', JSON_POST, 400, 'bad_request', -32700],
    ['not JSON-RPC', '{"id":1,"method":"ping"}', JSON_POST, 400, 'validation_failed', -32600],
    ['a batch over MCP_MAX_BATCH', JSON.stringify(Array.from({ length: 5 }, (_, id) => ({ jsonrpc: '2.0', id, method: 'ping' }))), JSON_POST, 400, 'batch_too_large', -32600],
    ['another Content-Type', '{"jsonrpc":"2.0","id":1,"method":"ping"}', { 'content-type': 'text/plain' }, 415, 'unsupported_media_type', -32600],
  ])('refuses %s before anything is forwarded', async (_what, body, headers, status, code, rpcCode) => {
    const answer = await post(body, headers);
    expect(answer.status).toBe(status);
    expect(rpcErrorOf(answer.text)).toMatchObject({ code: rpcCode, dataCode: code });
    expect(parts.upstream.received).toEqual([]);
    expect(parts.observed).toHaveLength(1);
  });

  it('refuses a GET with a body, and closes the connection it did not read', async () => {
    const answer = await server.call('GET', '/mcp', { ...bearer(KEY_A), 'content-length': '2' }, '{}');
    expect(answer.status).toBe(400);
    expect(answer.headers.connection).toBe('close');
    expect(rpcErrorOf(answer.text).dataCode).toBe('bad_request');
    expect(parts.upstream.received).toEqual([]);
  });

  it('hands a DELETE on without a body', async () => {
    const answer = await server.call('DELETE', '/mcp', bearer(KEY_A));
    expect(answer.status).toBe(202);
    expect(parts.upstream.received).toMatchObject([{ method: 'DELETE', body: null }]);
  });

  it('forwards nothing and answers nothing when the client leaves mid-body, and tells the decision once', async () => {
    const request = httpRequest({ host: '127.0.0.1', port: server.port, method: 'POST', path: '/mcp', headers: { ...bearer(KEY_A), ...JSON_POST, 'content-length': '100' }, agent: false });
    request.on('error', () => {});
    request.write('{"jsonrpc":');
    await until(() => handled === 1);
    request.destroy();
    await until(() => parts.observed.length === 1);
    expect(parts.observed).toMatchObject([{ allowed: false, code: 'bad_request' }]);
    expect(parts.upstream.received).toEqual([]);
  });
});
