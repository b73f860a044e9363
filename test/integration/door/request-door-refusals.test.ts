import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { errorHandler } from '../../../src/http/error-handler.ts';
import { Upstream } from '../../../src/proxy/upstream.ts';
import { BODY_LIMIT, closedPort, EVENTS, expectProblem, failedLine, type Outgoing, refusedLine, send, type Sent, untilClosed, upgradeRequest, useDoor, UUID } from './request-door-support.ts';

describe('RequestDoor: refusals and failures (real upstream and forwarder; stub pipeline)', () => {
  const { begin, receivedBesidesBarrier, logLines } = useDoor();

  describe('answers a refusal problem+json, logged once; nothing reaches the origin', () => {
    // [description, Authorization, client x-request-id, status, the refusal's code]
    const refusals: Array<[string, string | undefined, string | undefined, number, string]> = [
      ['refused at once', 'Bearer revoked', 'trace-9', 401, 'revoked_credential'],
      ['refused at once, with no client request id: a UUID', 'Bearer revoked', undefined, 401, 'revoked_credential'],
      ['refused at once, with a bad client request id: a UUID', 'Bearer revoked', 'bad id', 401, 'revoked_credential'],
      ['no credential', undefined, 'trace-14', 401, 'missing_credential'],
      ['a throttled prefix: 429 with Retry-After', 'Bearer throttled', 'trace-12', 429, 'rate_limited'],
      ['a scope missing: 403 naming it', 'Bearer scopeless', 'trace-15', 403, 'insufficient_scope'],
      ['a method the route does not take: 405 with Allow', 'Bearer wrong-method', 'trace-16', 405, 'method_not_allowed'],
      ['a bad path parameter: 400 with its errors', 'Bearer bad-param', 'trace-17', 400, 'validation_failed'],
      ['refused after a promise', 'Bearer cold-refused', 'trace-11', 401, 'invalid_credential'],
      ['refused after a promise, with a bad client request id: a UUID', 'Bearer cold-refused', 'bad id', 401, 'invalid_credential'],
      ['throttled after a promise: 429 with Retry-After', 'Bearer cold-throttled', 'trace-18', 429, 'rate_limited'],
    ];

    it.each(refusals)('%s', async (_what, authorization, requestId, status, code) => {
      const { port, pipeline, fastifyGot, forwardedIds } = await begin();
      const headers: Record<string, string> = {};
      if (authorization !== undefined) headers.authorization = authorization;
      if (requestId !== undefined) headers['x-request-id'] = requestId;
      const response = await send(port, { method: 'POST', path: EVENTS, headers, body: '{"refused":1}' });

      const id = expectProblem(response, status, code, requestId === undefined || requestId === 'bad id' ? UUID : requestId);
      const problem = JSON.parse(response.body) as Record<string, unknown>;
      const challenge = response.headers['www-authenticate'];
      if (code === 'missing_credential') expect(challenge).toBe('Bearer realm="gatehouse"');
      else if (status === 401) expect(challenge).toMatch(/^Bearer realm="gatehouse", error="invalid_token", error_description="/);
      else if (status === 403) expect(challenge).toBe('Bearer realm="gatehouse", error="insufficient_scope", scope="events:write"');
      else expect(challenge).toBeUndefined();
      expect(response.headers['retry-after']).toBe(status === 429 ? (authorization === 'Bearer throttled' ? '42' : '7') : undefined);
      expect(response.headers.allow).toBe(status === 405 ? 'GET, POST' : undefined);
      if (code === 'validation_failed') expect(problem.errors).toEqual([{ field: 'agent_id', message: 'must be a positive decimal integer' }]);
      expect(pipeline.calls).toHaveLength(1);
      expect(fastifyGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(logLines).toEqual([refusedLine(id, code, status)]);

      expect(await receivedBesidesBarrier(port)).toEqual([]);
      expect(logLines).toHaveLength(1);
    });

    it('the same status, headers and body as fastify with the gateway\'s error handler', async () => {
      const reference = Fastify({ logger: false, genReqId: () => 'trace-same' });
      reference.addHook('onRequest', (request, reply, done) => {
        reply.header('x-request-id', request.id);
        done();
      });
      reference.setErrorHandler(errorHandler);
      reference.post(EVENTS, {
        onRequest: (_request, _reply, done) => done(new GatewayError('rate_limited', 'Too many failed attempts for this key prefix', { retryAfter: 42 })),
        handler: async () => 'never',
      });
      await reference.listen({ port: 0, host: '127.0.0.1' });
      try {
        const { port } = await begin();
        const outgoing = { method: 'POST', path: EVENTS, headers: { authorization: 'Bearer throttled', 'x-request-id': 'trace-same' }, body: '{}' };
        const fromDoor = await send(port, outgoing);
        const fromFastify = await send((reference.server.address() as AddressInfo).port, outgoing);
        const comparable = ({ status, headers, body }: Sent) => {
          const { date: _date, ...rest } = headers;
          return { status, headers: rest, body };
        };
        expect(comparable(fromDoor)).toEqual(comparable(fromFastify));
      } finally {
        await reference.close();
      }
    });
  });

  describe('answers a failure with the same renderer, logged once as an error; nothing is forwarded', () => {
    // [description, Authorization, status, code]
    const failures: Array<[string, string, number, string]> = [
      ['the store is down (the promise rejects with a GatewayError)', 'Bearer store-down', 503, 'store_unavailable'],
      ['the store is down (the promise rejects with the store\'s own error)', 'Bearer store-error', 503, 'store_unavailable'],
      ['a bug (authorize throws)', 'Bearer broken', 500, 'internal_error'],
      ['a bug (the promise rejects with what is not a GatewayError)', 'Bearer broken-later', 500, 'internal_error'],
    ];

    it.each(failures)('%s', async (_what, authorization, status, code) => {
      const { port, fastifyGot, forwardedIds } = await begin();
      const response = await send(port, { method: 'POST', path: EVENTS, headers: { authorization, 'x-request-id': 'trace-13' }, body: '{"failed":1}' });
      expectProblem(response, status, code, 'trace-13');
      // A bug's message stays in the log.
      expect(response.body).not.toContain('bug');
      expect(fastifyGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(logLines).toEqual([failedLine('trace-13')]);

      expect(await receivedBesidesBarrier(port)).toEqual([]);
      expect(logLines).toHaveLength(1);
    });

    describe('the upstream is down: 502', () => {
      let down: Upstream;
      let closed: Awaited<ReturnType<typeof closedPort>>;
      beforeAll(async () => {
        closed = await closedPort();
        down = new Upstream({ url: `http://127.0.0.1:${closed.port}`, timeoutMs: 5_000 });
      });
      afterAll(async () => {
        await down?.close();
        await closed?.release();
      });

      // [description, request]
      const outgoings: Array<[string, Outgoing]> = [
        ['a GET, with the client\'s request id', { path: EVENTS, headers: { 'x-request-id': 'trace-down' } }],
        ['a GET, with a request id the door made', { path: EVENTS }],
        ['a POST with a body', { method: 'POST', path: EVENTS, headers: { 'content-type': 'application/json' }, body: '{"a":1}' }],
        ['a chunked POST', { method: 'POST', path: EVENTS, body: '{"a":1}', chunked: true }],
        ['a first use (decided after a promise)', { path: EVENTS, headers: { authorization: 'Bearer cold' } }],
      ];

      it.each(outgoings)('%s', async (_what, outgoing) => {
        const { port, pipeline, fastifyGot, forwardedIds } = await begin(down);
        const response = await send(port, { ...outgoing, headers: { authorization: 'Bearer cached', ...outgoing.headers } });
        const id = expectProblem(response, 502, 'upstream_unavailable', outgoing.headers?.['x-request-id'] ?? UUID);
        expect(pipeline.calls).toHaveLength(1);
        expect(forwardedIds).toEqual([id]);
        expect(fastifyGot).toEqual([]);
        expect(logLines).toEqual([failedLine(id)]);
      });

      it('a WebSocket upgrade: its 502, and the connection closed', async () => {
        const { port, forwardedIds } = await begin(down);
        const response = await untilClosed(port, upgradeRequest(`${EVENTS}/live`, { Authorization: 'Bearer cached', 'X-Request-Id': 'trace-ws-down' }));
        expectProblem(response, 502, 'upstream_unavailable', 'trace-ws-down');
        expect(forwardedIds).toEqual(['trace-ws-down']);
        expect(logLines).toEqual([failedLine('trace-ws-down')]);
      });
    });
  });

  describe('refuses a body over BODY_LIMIT with 413', () => {
    it('a declared body: before the pipeline is asked, with connection: close', async () => {
      const { port, pipeline, fastifyGot, forwardedIds } = await begin();
      const response = await send(port, { method: 'POST', path: EVENTS, headers: { authorization: 'Bearer cached', 'x-request-id': 'trace-declared' }, body: 'x'.repeat(BODY_LIMIT + 1) });
      expectProblem(response, 413, 'payload_too_large', 'trace-declared');
      expect(response.headers.connection).toBe('close');
      expect(pipeline.calls).toEqual([]);
      expect(fastifyGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(logLines).toEqual([refusedLine('trace-declared', 'payload_too_large', 413)]);
      expect(await receivedBesidesBarrier(port)).toEqual([]);
    });

    it('a chunked body past it: the forward fails, and the upstream never receives a complete request', async () => {
      const { port, pipeline, forwardedIds } = await begin();
      const response = await send(port, {
        method: 'POST',
        path: EVENTS,
        headers: { authorization: 'Bearer cached', 'x-request-id': 'trace-big' },
        body: 'z'.repeat(BODY_LIMIT * 4),
        chunked: true,
      });
      expectProblem(response, 413, 'payload_too_large', 'trace-big');
      expect(pipeline.calls).toHaveLength(1);
      expect(forwardedIds).toEqual(['trace-big']);
      expect(logLines).toEqual([refusedLine('trace-big', 'payload_too_large', 413)]);
      expect(await receivedBesidesBarrier(port)).toEqual([]);
    });
  });

});
