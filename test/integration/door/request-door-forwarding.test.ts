import { connect } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { ALLOWED, BODY_LIMIT, EVENTS, type Outgoing, send, useDoor, UUID } from './request-door-support.ts';

describe('RequestDoor: forwarding (real upstream and forwarder; stub pipeline, MCP handler, own endpoints and fastify)', () => {
  const fixture = useDoor();
  const { begin, receivedBesidesBarrier, logLines } = fixture;

  describe('forwards an allowed request', () => {
    it('sends the upstream the target byte for byte, the body, the identity and forwarding headers; answers with the upstream\'s answer', async () => {
      const { port, pipeline, fastifyGot, ownAsked, forwardedIds } = await begin();
      const path = '/api/v1/agents/7/events/a%20b?z=1&a=%2F&c=x%20y&d=%7E&e';
      const body = '{"type":"call.ended","id":1}';
      const response = await send(port, {
        method: 'POST',
        path,
        body,
        headers: {
          authorization: 'Bearer cached',
          'content-type': 'application/json',
          'x-custom': 'kept',
          'x-request-id': 'trace-123',
          // Only the gateway may say who the caller is and where the request came from.
          'x-auth-kind': 'admin',
          'x-auth-admin-id': '1',
          'x-auth-key-id': '999',
          'x_auth_scopes': 'everything',
          'x-forwarded-for': '6.6.6.6',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'evil.example',
          forwarded: 'for=6.6.6.6',
        },
      });

      expect(response.status).toBe(200);
      expect(JSON.parse(response.body)).toEqual({ ok: true, path });
      expect(response.headers['x-origin']).toBe('yes');
      expect(response.headers['x-request-id']).toBe('trace-123');
      expect(fastifyGot).toEqual([]);
      expect(ownAsked).toEqual([path]);
      // Decided on the path, without its query string.
      expect(pipeline.calls).toEqual([{ authorization: 'Bearer cached', path: '/api/v1/agents/7/events/a%20b' }]);
      expect(forwardedIds).toEqual(['trace-123']);
      expect(logLines).toEqual([]);

      expect(fixture.origin.received).toHaveLength(1);
      const [received] = fixture.origin.received;
      expect(received).toMatchObject({ method: 'POST', url: path, body });
      expect(received!.headers).toMatchObject({
        'content-type': 'application/json',
        'content-length': String(body.length),
        'x-custom': 'kept',
        'x-auth-kind': 'api_key',
        'x-auth-key-id': '42',
        'x-auth-agent-id': '7',
        'x-auth-scopes': 'events:write',
        'x-forwarded-for': '127.0.0.1',
        'x-forwarded-proto': 'http',
        'x-forwarded-host': `127.0.0.1:${port}`,
        'x-request-id': 'trace-123',
      });
      for (const absent of ['authorization', 'x-auth-admin-id', 'x_auth_scopes', 'forwarded']) expect(received!.headers[absent]).toBeUndefined();
      // Each set once, by the gateway: the client's copies are dropped, not merely overridden.
      const names = received!.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
      for (const name of ['x-auth-kind', 'x-auth-key-id', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-request-id']) {
        expect(names.filter((each) => each === name), name).toHaveLength(1);
      }
    });

    // [description, request]
    const forwarded: Array<[string, Outgoing]> = [
      ['a GET of the root', { path: '/' }],
      ['HEAD', { method: 'HEAD', path: EVENTS }],
      ['OPTIONS', { method: 'OPTIONS', path: EVENTS }],
      ['DELETE', { method: 'DELETE', path: `${EVENTS}/3` }],
      ['a body of exactly BODY_LIMIT bytes', { method: 'PUT', path: EVENTS, body: 'x'.repeat(BODY_LIMIT) }],
      ['a chunked body within BODY_LIMIT', { method: 'PATCH', path: EVENTS, body: 'y'.repeat(BODY_LIMIT), chunked: true }],
      ['a path next to an own path', { path: '/api/v1/api-keysX' }],
      ['a path that starts like a reserved one', { path: '/docsx' }],
      ['a path below the MCP path', { method: 'POST', path: '/mcp/extra', body: '{}' }],
      ['a long path with a long parameter', { path: `/api/v1/agents/${'9'.repeat(120)}/events/${'x'.repeat(150)}` }],
    ];

    it.each(forwarded)('%s', async (_what, outgoing) => {
      const { port, pipeline, fastifyGot, mcpGot } = await begin();
      const response = await send(port, { ...outgoing, headers: { authorization: 'Bearer cached', ...outgoing.headers } });
      expect(response.status).toBe(200);
      expect(response.headers['x-origin']).toBe('yes');
      expect(fastifyGot).toEqual([]);
      expect(mcpGot).toEqual([]);
      expect(pipeline.calls).toEqual([{ authorization: 'Bearer cached', path: outgoing.path }]);
      expect(fixture.origin.received).toHaveLength(1);
      expect(fixture.origin.received[0]).toMatchObject({ method: outgoing.method ?? 'GET', url: outgoing.path, body: outgoing.body ?? '' });
      expect(fixture.origin.received[0]!.headers['x-auth-key-id']).toBe('42');
    });

    // [description, client x-request-id, the id it is answered and forwarded with (a UUID when undefined)]
    const requestIds: Array<[string, string | undefined, string | undefined]> = [
      ['a plain token is kept', 'trace-123', 'trace-123'],
      ['every character a token may hold', 'A.b_c:d@e/f+g=h-9', 'A.b_c:d@e/f+g=h-9'],
      ['128 characters is kept', 'a'.repeat(128), 'a'.repeat(128)],
      ['129 characters is replaced', 'a'.repeat(129), undefined],
      ['a space is replaced', 'trace 123', undefined],
      ['a quote is replaced', 'trace"123', undefined],
      ['a comma is replaced', 'a,b', undefined],
      ['none gets a UUID', undefined, undefined],
    ];

    it.each(requestIds)('request id: %s', async (_what, sent, expected) => {
      const { port, forwardedIds } = await begin();
      const headers: Record<string, string> = { authorization: 'Bearer cached' };
      if (sent !== undefined) headers['x-request-id'] = sent;
      const response = await send(port, { path: EVENTS, headers });
      expect(response.status).toBe(200);
      const answered = response.headers['x-request-id'];
      if (expected === undefined) expect(answered).toMatch(UUID);
      else expect(answered).toBe(expected);
      expect(fixture.origin.received).toHaveLength(1);
      expect(fixture.origin.received[0]!.headers['x-request-id']).toBe(answered);
      expect(forwardedIds).toEqual([answered]);
    });
  });

  describe('forwards a first use once its decision arrives', () => {
    it.each([
      ['with the client request id', 'trace-10'],
      ['with a bad client request id: a UUID', 'bad id'],
    ])('%s', async (_what, requestId) => {
      const { port, pipeline, fastifyGot, forwardedIds } = await begin();
      const response = await send(port, { method: 'POST', path: EVENTS, headers: { authorization: 'Bearer cold', 'x-request-id': requestId }, body: '{"a":1}' });
      expect(response.status).toBe(200);
      expect(pipeline.calls).toHaveLength(1);
      expect(fastifyGot).toEqual([]);
      expect(fixture.origin.received).toHaveLength(1);
      expect(fixture.origin.received[0]).toMatchObject({ method: 'POST', url: EVENTS, body: '{"a":1}' });
      expect(fixture.origin.received[0]!.headers).toMatchObject({ 'x-auth-kind': 'api_key', 'x-auth-key-id': '42' });
      const answered = response.headers['x-request-id'];
      expect(answered).toEqual(requestId === 'bad id' ? expect.stringMatching(UUID) : requestId);
      expect(forwardedIds).toEqual([answered]);
    });

    it('not before: nothing reaches the origin while the decision is pending, the request does once it is allowed', async () => {
      const { port, pipeline, forwardedIds } = await begin();
      const pending = send(port, { method: 'POST', path: EVENTS, headers: { authorization: 'Bearer held', 'x-request-id': 'trace-held' }, body: '{"held":1}' });
      await vi.waitFor(() => expect(pipeline.held).toHaveLength(1));
      expect(await receivedBesidesBarrier(port)).toEqual([]);
      expect(forwardedIds).toHaveLength(1);
      pipeline.held[0]!.settle(ALLOWED);
      const response = await pending;
      expect(response.status).toBe(200);
      expect(response.headers['x-request-id']).toBe('trace-held');
      expect(forwardedIds).toEqual([expect.any(String), 'trace-held']);
      expect(fixture.origin.received.filter((request) => request.body === '{"held":1}')).toHaveLength(1);
    });

    it('a client that left while its credential was checked: nothing is forwarded, nothing answered', async () => {
      const { port, pipeline } = await begin();
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(`GET ${EVENTS}?gone=1 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer held\r\n\r\n`);
      await vi.waitFor(() => expect(pipeline.held).toHaveLength(1));
      const { request } = pipeline.held[0]!;
      const closed = new Promise((resolve) => request.socket.once('close', resolve));
      socket.destroy();
      await closed;
      pipeline.held[0]!.settle(ALLOWED);
      expect(await receivedBesidesBarrier(port, `${EVENTS}?gone=1`)).toEqual([]);
      expect(logLines).toEqual([]);
    });
  });

});
