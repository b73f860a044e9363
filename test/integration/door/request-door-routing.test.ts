import { describe, expect, it } from 'vitest';
import { rawRequest } from '../../support/raw-http.ts';
import { BODY_LIMIT, EVENTS, expectProblem, FASTIFY_STATUS, MCP_PATH, MCP_STATUS, type Outgoing, refusedLine, send, untilClosed, upgradeRequest, useDoor } from './request-door-support.ts';

describe('RequestDoor: what is not forwarded (own endpoints, closing, ambiguous targets, MCP paths)', () => {
  const { begin, startDoor, receivedBesidesBarrier, logLines } = useDoor();

  describe('passes the gateway\'s own endpoints to fastify untouched: nothing decided, nothing forwarded', () => {
    const cached = 'Bearer cached';
    // [description, request as http.request sends it, or raw bytes]
    const own: Array<[string, Outgoing | string]> = [
      ['an own path', { path: '/api/v1/api-keys', headers: { authorization: cached } }],
      ['an own path with a query string', { path: '/api/v1/api-keys?limit=5', headers: { authorization: cached } }],
      ['an own path, HEAD', { method: 'HEAD', path: '/api/v1/api-keys', headers: { authorization: cached } }],
      ['an own path, a method it refuses with 405', { method: 'PUT', path: '/api/v1/api-keys', headers: { authorization: cached }, body: '{}' }],
      ['an own path without a credential', { method: 'POST', path: '/api/v1/auth/login', body: '{}' }],
      ['an own path, a declared body over BODY_LIMIT (fastify applies its own)', { method: 'POST', path: '/api/v1/auth/login', body: 'x'.repeat(BODY_LIMIT + 1) }],
      ['an own path, two Authorization headers (fastify refuses them itself)', `GET /api/v1/api-keys HTTP/1.1\r\nHost: gw\r\nAuthorization: ${cached}\r\nAuthorization: ${cached}\r\nConnection: close\r\n\r\n`],
    ];

    it.each(own)('%s', async (_what, outgoing) => {
      const { port, pipeline, fastifyGot, ownAsked, mcpGot, forwardedIds } = await begin();
      const target = typeof outgoing === 'string' ? outgoing.split(' ')[1]! : outgoing.path;
      const response = typeof outgoing === 'string' ? await rawRequest(port, outgoing) : await send(port, outgoing);
      expect(response.status).toBe(FASTIFY_STATUS);
      expect(response.headers['x-answered-by']).toBe('fastify');
      expect(ownAsked).toEqual([target]);
      expect(fastifyGot).toEqual([{ method: typeof outgoing === 'string' ? 'GET' : (outgoing.method ?? 'GET'), url: target }]);
      expect(pipeline.calls).toEqual([]);
      expect(mcpGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(logLines).toEqual([]);
      expect(await receivedBesidesBarrier(port)).toEqual([]);
    });

    // Not among the stub's own paths, but reserved (src/config/reserved-paths.ts): fastify's too.
    const reserved: Array<[string, Outgoing]> = [
      ['a path below a reserved one', { path: '/docs/x', headers: { authorization: cached } }],
      ['a reserved path with a trailing slash', { method: 'DELETE', path: '/api/v1/api-keys/29/', headers: { authorization: cached } }],
      ['a reserved path in upper case, with a body', { method: 'POST', path: '/API/V1/AUTH/PASSWORD', headers: { authorization: cached }, body: '{"new_password":"x"}' }],
      ['a reserved path behind an encoded slash', { method: 'POST', path: '/api/v1%2Fauth/logout', headers: { authorization: cached } }],
      ['a reserved path behind a dot-dot segment', { path: '/x/../console', headers: { authorization: cached } }],
    ];

    it.each(reserved)('%s', async (_what, outgoing) => {
      const { port, pipeline, fastifyGot, mcpGot, forwardedIds } = await begin();
      const response = await send(port, outgoing);
      expect(response.status).toBe(FASTIFY_STATUS);
      expect(fastifyGot).toEqual([{ method: outgoing.method ?? 'GET', url: outgoing.path }]);
      expect(pipeline.calls).toEqual([]);
      expect(mcpGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(await receivedBesidesBarrier(port)).toEqual([]);
    });

    it('an upgrade on an own path: fastify answers it, and the connection is closed', async () => {
      const { port, pipeline, fastifyGot } = await begin();
      const response = await untilClosed(port, upgradeRequest('/api/v1/api-keys', { Authorization: cached }));
      expect(response.status).toBe(FASTIFY_STATUS);
      expect(fastifyGot).toEqual([{ method: 'GET', url: '/api/v1/api-keys' }]);
      expect(pipeline.calls).toEqual([]);
      expect(await receivedBesidesBarrier(port)).toEqual([]);
    });
  });

  describe('once closed, passes every request to fastify', () => {
    // [description, request]
    const everything: Array<[string, Outgoing]> = [
      ['an allowed request', { path: EVENTS, headers: { authorization: 'Bearer cached' } }],
      ['a first use', { path: EVENTS, headers: { authorization: 'Bearer cold' } }],
      ['a refused request', { path: EVENTS, headers: { authorization: 'Bearer revoked' } }],
      ['an MCP path', { method: 'POST', path: MCP_PATH, headers: { authorization: 'Bearer cached' }, body: '{}' }],
      ['an ambiguous target', { path: '/a/../b', headers: { authorization: 'Bearer cached' } }],
      ['a declared body over BODY_LIMIT', { method: 'POST', path: EVENTS, headers: { authorization: 'Bearer cached' }, body: 'x'.repeat(BODY_LIMIT + 1) }],
      ['an own path', { path: '/api/v1/api-keys', headers: { authorization: 'Bearer cached' } }],
    ];

    it.each(everything)('%s', async (_what, outgoing) => {
      const { port, door, pipeline, fastifyGot, mcpGot, forwardedIds } = await begin();
      expect((await send(port, { path: EVENTS, headers: { authorization: 'Bearer cached', 'x-request-id': 'trace-before' } })).status).toBe(200);
      door.close();
      const response = await send(port, outgoing);
      expect(response.status).toBe(FASTIFY_STATUS);
      expect(fastifyGot).toEqual([{ method: outgoing.method ?? 'GET', url: outgoing.path }]);
      expect(pipeline.calls).toHaveLength(1);
      expect(mcpGot).toEqual([]);
      expect(forwardedIds).toEqual(['trace-before']);
      expect(logLines).toEqual([]);
      // The barrier goes through another door on the same upstream: this one forwards nothing any more.
      const other = await startDoor();
      expect(await receivedBesidesBarrier(other.port)).toEqual([expect.objectContaining({ url: EVENTS, headers: expect.objectContaining({ 'x-request-id': 'trace-before' }) })]);
    });

    it('an upgrade', async () => {
      const { port, door, pipeline, fastifyGot } = await begin();
      door.close();
      const response = await untilClosed(port, upgradeRequest(`${EVENTS}/live`, { Authorization: 'Bearer cached' }));
      expect(response.status).toBe(FASTIFY_STATUS);
      expect(fastifyGot).toEqual([{ method: 'GET', url: `${EVENTS}/live` }]);
      expect(pipeline.calls).toEqual([]);
      const other = await startDoor();
      expect(await receivedBesidesBarrier(other.port)).toEqual([]);
    });
  });

  describe('refuses an ambiguous request with 400 without asking the pipeline', () => {
    const cached = 'Bearer cached';
    // [description, request as http.request sends it, or raw bytes, code]
    const ambiguous: Array<[string, Outgoing | string, string]> = [
      ['a dot-dot', { path: '/a/../b', headers: { authorization: cached } }, 'ambiguous_path'],
      ['an encoded dot', { path: '/%2e', headers: { authorization: cached } }, 'ambiguous_path'],
      ['an encoded dot-dot', { path: '/a/%2e%2e/b', headers: { authorization: cached } }, 'ambiguous_path'],
      ['a leading double slash', { path: '//x', headers: { authorization: cached } }, 'ambiguous_path'],
      ['a double slash inside', { path: '/api/v1//agents/7/events', headers: { authorization: cached } }, 'ambiguous_path'],
      ['an encoded slash', { path: '/api/v1/agents%2F7/events', headers: { authorization: cached } }, 'ambiguous_path'],
      ['an encoded unreserved character', { path: '/api/v1/%61gents/7/events', headers: { authorization: cached } }, 'ambiguous_path'],
      ['a malformed escape', { path: '/api/v1/agents/%zz/events', headers: { authorization: cached } }, 'ambiguous_path'],
      ['a semicolon parameter', { path: '/api/v1/agents/7/events;x', headers: { authorization: cached } }, 'ambiguous_path'],
      ['a dot-dot into the MCP path', { method: 'POST', path: '/x/../mcp', headers: { authorization: cached }, body: '{}' }, 'ambiguous_path'],
      ['an absolute-form target', `GET http://127.0.0.1${EVENTS} HTTP/1.1\r\nHost: gw\r\nAuthorization: ${cached}\r\nConnection: close\r\n\r\n`, 'ambiguous_path'],
      ['two Authorization headers', `GET ${EVENTS} HTTP/1.1\r\nHost: gw\r\nAuthorization: ${cached}\r\nAuthorization: ${cached}\r\nConnection: close\r\n\r\n`, 'duplicate_header'],
      ['two Authorization headers in other case', `GET ${EVENTS} HTTP/1.1\r\nHost: gw\r\nauthorization: ${cached}\r\nAUTHORIZATION: Bearer revoked\r\nConnection: close\r\n\r\n`, 'duplicate_header'],
      ['two Host headers', `GET ${EVENTS} HTTP/1.1\r\nHost: gw\r\nHost: other\r\nAuthorization: ${cached}\r\nConnection: close\r\n\r\n`, 'duplicate_header'],
      ['two Authorization headers on the MCP path', `POST ${MCP_PATH} HTTP/1.1\r\nHost: gw\r\nAuthorization: ${cached}\r\nAuthorization: ${cached}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, 'duplicate_header'],
    ];

    it.each(ambiguous)('%s', async (_what, outgoing, code) => {
      const { port, pipeline, fastifyGot, mcpGot, forwardedIds } = await begin();
      const response = typeof outgoing === 'string' ? await rawRequest(port, outgoing.replace('\r\n\r\n', '\r\nX-Request-Id: trace-400\r\n\r\n')) : await send(port, { ...outgoing, headers: { ...outgoing.headers, 'x-request-id': 'trace-400' } });
      expectProblem(response, 400, code, 'trace-400');
      expect(pipeline.calls).toEqual([]);
      // Counted with the decisions, once, though no route was matched.
      expect(pipeline.observed).toEqual([{ code }]);
      expect(fastifyGot).toEqual([]);
      expect(mcpGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(logLines).toEqual([refusedLine('trace-400', code, 400)]);
      expect(await receivedBesidesBarrier(port)).toEqual([]);
    });
  });

  describe('hands MCP paths to the MCP handler', () => {
    it.each([
      ['a POST', { method: 'POST', path: MCP_PATH, headers: { authorization: 'Bearer cached', 'x-request-id': 'trace-mcp' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' }],
      ['a GET with a query string', { path: `${MCP_PATH}?sessionId=1`, headers: { authorization: 'Bearer revoked', 'x-request-id': 'trace-mcp' } }],
      ['a DELETE without a credential', { method: 'DELETE', path: MCP_PATH, headers: { 'x-request-id': 'trace-mcp' } }],
    ] as Array<[string, Outgoing]>)('%s: decided there, not by the door', async (_what, outgoing) => {
      const { port, pipeline, fastifyGot, mcpGot, forwardedIds } = await begin();
      const response = await send(port, outgoing);
      expect(response.status).toBe(MCP_STATUS);
      expect(response.headers['x-request-id']).toBe('trace-mcp');
      expect(mcpGot).toEqual([{ method: outgoing.method ?? 'GET', url: outgoing.path, requestId: 'trace-mcp', path: MCP_PATH }]);
      expect(pipeline.calls).toEqual([]);
      expect(fastifyGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
    });

    it('an upgrade on an MCP path is refused 400, and the connection closed', async () => {
      const { port, pipeline, fastifyGot, mcpGot, forwardedIds } = await begin();
      const response = await untilClosed(port, upgradeRequest(MCP_PATH, { Authorization: 'Bearer cached', 'X-Request-Id': 'trace-mcp-ws' }));
      expectProblem(response, 400, 'bad_request', 'trace-mcp-ws');
      expect(JSON.parse(response.body)).toMatchObject({ detail: 'MCP paths take no upgrade: MCP runs over plain HTTP requests' });
      expect(mcpGot).toEqual([]);
      expect(pipeline.calls).toEqual([]);
      expect(fastifyGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(logLines).toEqual([refusedLine('trace-mcp-ws', 'bad_request', 400)]);
      expect(await receivedBesidesBarrier(port)).toEqual([]);
    });
  });

});
