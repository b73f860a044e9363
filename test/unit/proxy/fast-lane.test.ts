import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { errorHandler } from '../../../src/http/error-handler.ts';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { methodNotAllowed } from '../../../src/http/method-not-allowed.ts';
import type { ApiKeyPrincipal } from '../../../src/policy/principal.ts';
import type { CompiledRoute } from '../../../src/policy/routes.ts';
import type { Authorization, Authorized } from '../../../src/proxy/authorize.ts';
import { createFastLane } from '../../../src/proxy/fast-lane.ts';
import { createForwarder, FORWARDED_METHODS, type Forwarder } from '../../../src/proxy/forward.ts';
import { OpenStreams } from '../../../src/proxy/open-streams.ts';
import { ForwardedRoutes } from '../../../src/proxy/forwarded-routes.ts';
import { takeHandOver, type HandOver } from '../../../src/proxy/hand-over.ts';
import { Upstream } from '../../../src/proxy/upstream.ts';
import { startOrigin, type Origin } from '../../support/origin.ts';
import { rawRequest } from '../../support/raw-http.ts';

const BODY_LIMIT = 64;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** The status the fallback (fastify's place) answers with: nothing else in these tests sends it. */
const FALLBACK_STATUS = 299;

const route: CompiledRoute = {
  name: 'events',
  path: '/**',
  methods: '*',
  credential: 'api_key',
  scope: 'events:write',
  feature: undefined,
  agentParam: undefined,
  mcp: undefined,
};
const principal: ApiKeyPrincipal = { kind: 'api_key', keyId: 42, agentId: 7, scopes: ['events:write'], expiresAt: null };

/**
 * The stub authorizer, by `Authorization`: `Bearer cached` is allowed at once (a cached key),
 * `Bearer cold` needs I/O and is allowed (a promise), `Bearer cold-refused` needs I/O and is
 * refused (a rejected promise), `Bearer revoked` is refused from memory (throws), `Bearer
 * store-down` fails (503 after I/O), `Bearer broken` throws what is not a GatewayError.
 */
class StubAuthorizer {
  calls = 0;
  lastPromise: Promise<Authorized> | undefined;

  readonly authorize = (request: IncomingMessage): Authorization => {
    this.calls++;
    switch (request.headers.authorization) {
      case 'Bearer cached':
        return { route, principal };
      case 'Bearer cold':
        this.lastPromise = Promise.resolve({ route, principal });
        return this.lastPromise;
      case 'Bearer cold-refused':
        this.lastPromise = Promise.reject(new GatewayError('invalid_credential', 'The API key is not valid'));
        return this.lastPromise;
      case 'Bearer revoked':
        throw new GatewayError('revoked_credential', 'The API key was revoked');
      case 'Bearer throttled':
        throw new GatewayError('rate_limited', 'Too many failed attempts for this key prefix', { retryAfter: 42 });
      case 'Bearer store-down':
        this.lastPromise = Promise.reject(new GatewayError('store_unavailable', 'The store cannot be reached; retry later'));
        return this.lastPromise;
      case 'Bearer broken':
        throw new TypeError('a bug');
      default:
        throw new GatewayError('missing_credential', 'No credential');
    }
  };
}

/** The routes fastify would have in the gateway, in small: one own endpoint (with its 405 route), an MCP-like path, the forwarding routes. */
async function routesApp(): Promise<{ app: FastifyInstance; routes: ForwardedRoutes }> {
  const app = Fastify({ logger: false });
  const routes = new ForwardedRoutes(app);
  const never = async () => {
    throw new Error('only routed, never served');
  };
  app.get('/api/v1/api-keys', never);
  app.post('/api/v1/api-keys', never);
  methodNotAllowed(app, '/api/v1/api-keys', ['GET', 'POST']);
  await app.register(async (scope) => {
    scope.route({ method: scope.supportedMethods, url: '/mcp', exposeHeadRoute: false, handler: never });
  });
  for (const url of ['/', '/*']) {
    app.route({ method: FORWARDED_METHODS, url, exposeHeadRoute: false, config: { forwarded: true }, handler: never });
  }
  await app.ready();
  return { app, routes };
}

/** A lane served on port 0 in front of a fallback that records the hand-over it takes and answers 299. */
interface LaneServer {
  port: number;
  authorizer: StubAuthorizer;
  /** One entry per request the lane passed to the fallback: what `takeHandOver` gave it. */
  fallback: Array<HandOver | undefined>;
  /** The request id the lane gave each request it forwarded itself. */
  forwardedIds: string[];
  /** The log lines the lane wrote (JSON), as fastify's logger writes them. */
  logLines: Array<Record<string, unknown>>;
  close: () => void;
  stop: () => Promise<void>;
}

async function startLane(routes: ForwardedRoutes, upstream: Upstream): Promise<LaneServer> {
  const authorizer = new StubAuthorizer();
  const fallback: LaneServer['fallback'] = [];
  const forwardedIds: string[] = [];
  const logLines: LaneServer['logLines'] = [];
  // Fastify's own logger (pino), writing into logLines.
  const logger = Fastify({ logger: { level: 'info', stream: { write: (line: string) => logLines.push(JSON.parse(line) as Record<string, unknown>) } } });
  const forwarder = createForwarder({ upstream, forwardAuthorization: false, bodyLimit: BODY_LIMIT, streams: new OpenStreams({ maxPerCredential: 16, now: () => new Date() }) });
  const forward: Forwarder = (request, response, requestId, authorized, refuse, reply) => {
    forwardedIds.push(requestId);
    forwarder(request, response, requestId, authorized, refuse, reply);
  };
  const lane = createFastLane({
    routes,
    authorize: authorizer.authorize,
    forward,
    bodyLimit: BODY_LIMIT,
    fastify: (request: IncomingMessage, response: ServerResponse) => {
      fallback.push(takeHandOver(request));
      response.writeHead(FALLBACK_STATUS);
      response.end();
    },
    log: logger.log,
  });
  const server: Server = createServer(lane.listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    authorizer,
    fallback,
    forwardedIds,
    logLines,
    close: lane.close,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface Sent {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

interface Outgoing {
  method?: string;
  /** The request target, sent byte for byte. */
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** Send the body with `Transfer-Encoding: chunked` instead of a Content-Length. */
  chunked?: boolean;
}

/** One request on a fresh connection, with exactly the target and headers given. */
function send(port: number, { method = 'GET', path, headers = {}, body, chunked = false }: Outgoing): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ host: '127.0.0.1', port, method, path, agent: false, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks).toString() }));
      response.on('error', reject);
    });
    outgoing.on('error', reject);
    if (body === undefined) {
      outgoing.end();
      return;
    }
    // Node would declare the length of a body given to end() in one piece: chunked must be asked for.
    outgoing.setHeader(chunked ? 'transfer-encoding' : 'content-length', chunked ? 'chunked' : Buffer.byteLength(body));
    outgoing.end(body);
  });
}

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Until the origin has recorded `count` requests, or a short while has passed (for asserting none arrived). */
async function settle(origin: Origin, count = 1, ms = 200): Promise<void> {
  const until = Date.now() + ms;
  while (origin.received.length < count && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('fast lane (real upstream and forwarder, stub authorizer and fallback)', () => {
  let origin: Origin;
  let upstream: Upstream;
  let app: FastifyInstance;
  let routes: ForwardedRoutes;
  let lane: LaneServer;

  beforeAll(async () => {
    origin = await startOrigin();
    upstream = new Upstream({ url: origin.url, timeoutMs: 5_000 });
    ({ app, routes } = await routesApp());
  });
  afterAll(async () => {
    await upstream?.close();
    await origin?.close();
    await app?.close();
  });
  afterEach(async () => {
    await lane?.stop();
  });

  const begin = async (through: Upstream = upstream) => {
    origin.clear();
    lane = await startLane(routes, through);
    return lane;
  };

  describe('forwards a request allowed from memory itself', () => {
    it('sends the upstream the target byte for byte, the body, the identity and forwarding headers; answers with the upstream\'s answer', async () => {
      const { port, authorizer, fallback, forwardedIds } = await begin();
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
      expect(fallback).toEqual([]);
      expect(authorizer.calls).toBe(1);
      expect(forwardedIds).toEqual(['trace-123']);

      expect(origin.received).toHaveLength(1);
      const [received] = origin.received;
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
      ['HEAD', { method: 'HEAD', path: '/api/v1/agents/7/events' }],
      ['OPTIONS', { method: 'OPTIONS', path: '/api/v1/agents/7/events' }],
      ['DELETE', { method: 'DELETE', path: '/api/v1/agents/7/events/3' }],
      ['a body of exactly BODY_LIMIT bytes', { method: 'PUT', path: '/api/v1/agents/7/events', body: 'x'.repeat(BODY_LIMIT) }],
      ['a chunked body within BODY_LIMIT', { method: 'PATCH', path: '/api/v1/agents/7/events', body: 'y'.repeat(BODY_LIMIT), chunked: true }],
      ['a path next to an own path', { path: '/api/v1/api-keysX' }],
      ['a path below the MCP path', { method: 'POST', path: '/mcp/extra', body: '{}' }],
      ['a long path with a long parameter', { path: `/api/v1/agents/${'9'.repeat(120)}/events/${'x'.repeat(150)}` }],
    ];

    it.each(forwarded)('%s', async (_what, outgoing) => {
      const { port, authorizer, fallback } = await begin();
      const response = await send(port, { ...outgoing, headers: { authorization: 'Bearer cached', ...outgoing.headers } });
      await settle(origin);
      expect(response.status).toBe(200);
      expect(response.headers['x-origin']).toBe('yes');
      expect(fallback).toEqual([]);
      expect(authorizer.calls).toBe(1);
      expect(origin.received).toHaveLength(1);
      expect(origin.received[0]).toMatchObject({ method: outgoing.method ?? 'GET', url: outgoing.path, body: outgoing.body ?? '' });
      expect(origin.received[0]!.headers['x-auth-key-id']).toBe('42');
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
      const response = await send(port, { path: '/api/v1/agents/7/events', headers });
      await settle(origin);
      expect(response.status).toBe(200);
      const answered = response.headers['x-request-id'];
      if (expected === undefined) expect(answered).toMatch(UUID);
      else expect(answered).toBe(expected);
      expect(origin.received).toHaveLength(1);
      expect(origin.received[0]!.headers['x-request-id']).toBe(answered);
      expect(forwardedIds).toEqual([answered]);
    });
  });

  describe('forwards a first use itself once its decision arrives', () => {
    it.each([
      ['with the client request id', 'trace-10'],
      ['with a bad client request id: a UUID', 'bad id'],
    ])('%s', async (_what, requestId) => {
      const { port, authorizer, fallback, forwardedIds } = await begin();
      const response = await send(port, { method: 'POST', path: '/api/v1/agents/7/events', headers: { authorization: 'Bearer cold', 'x-request-id': requestId }, body: '{"a":1}' });
      await settle(origin);
      expect(response.status).toBe(200);
      expect(authorizer.calls).toBe(1);
      expect(fallback).toEqual([]);
      expect(origin.received).toHaveLength(1);
      expect(origin.received[0]).toMatchObject({ method: 'POST', url: '/api/v1/agents/7/events', body: '{"a":1}' });
      expect(origin.received[0]!.headers).toMatchObject({ 'x-auth-kind': 'api_key', 'x-auth-key-id': '42' });
      const answered = response.headers['x-request-id'];
      expect(answered).toEqual(requestId === 'bad id' ? expect.stringMatching(UUID) : requestId);
      expect(forwardedIds).toEqual([answered]);
    });
  });

  describe('answers the decision\'s refusals itself, as fastify\'s error handler does', () => {
    // [description, Authorization, client x-request-id, status, the refusal's code]
    const refusals: Array<[string, string, string | undefined, number, string]> = [
      ['a refusal decided from memory (authorize throws)', 'Bearer revoked', 'trace-9', 401, 'revoked_credential'],
      ['a refusal, with no client request id: a UUID', 'Bearer revoked', undefined, 401, 'revoked_credential'],
      ['a refusal that needed I/O (the promise rejects)', 'Bearer cold-refused', 'trace-11', 401, 'invalid_credential'],
      ['a refusal that needed I/O, with a bad client request id: a UUID', 'Bearer cold-refused', 'bad id', 401, 'invalid_credential'],
      ['a throttled prefix: 429 with Retry-After', 'Bearer throttled', 'trace-12', 429, 'rate_limited'],
    ];

    it.each(refusals)('%s', async (_what, authorization, requestId, status, code) => {
      const { port, authorizer, fallback, forwardedIds, logLines } = await begin();
      const headers: Record<string, string> = { authorization };
      if (requestId !== undefined) headers['x-request-id'] = requestId;
      const response = await send(port, { method: 'POST', path: '/api/v1/agents/7/events', headers, body: '{}' });
      await settle(origin, 1, 100);

      const id = response.headers['x-request-id'];
      expect(id).toEqual(requestId === undefined || requestId === 'bad id' ? expect.stringMatching(UUID) : requestId);
      expect(response.status).toBe(status);
      expect(response.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      expect(response.headers['content-length']).toBe(String(Buffer.byteLength(response.body)));
      expect(JSON.parse(response.body)).toMatchObject({ status, code, instance: id });
      if (status === 401) expect(response.headers['www-authenticate']).toMatch(/^Bearer realm="gatehouse", error="invalid_token"/);
      if (status === 429) expect(response.headers['retry-after']).toBe('42');
      expect(authorizer.calls).toBe(1);
      expect(fallback).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(origin.received).toEqual([]);
      expect(logLines).toEqual([expect.objectContaining({ level: 30, reqId: id, code, status, msg: 'request refused' })]);
    });

    it('the same status, headers and body as fastify with the gateway\'s error handler', async () => {
      const reference = Fastify({ logger: false, genReqId: () => 'trace-same' });
      reference.addHook('onRequest', (request, reply, done) => {
        reply.header('x-request-id', request.id);
        done();
      });
      reference.setErrorHandler(errorHandler);
      // Refused as the gateway's forwarding route refuses: in its onRequest hook, before any body is read.
      reference.post('/api/v1/agents/7/events', {
        onRequest: (_request, _reply, done) => done(new GatewayError('rate_limited', 'Too many failed attempts for this key prefix', { retryAfter: 42 })),
        handler: async () => 'never',
      });
      await reference.listen({ port: 0, host: '127.0.0.1' });
      try {
        const { port } = await begin();
        const outgoing = { method: 'POST', path: '/api/v1/agents/7/events', headers: { authorization: 'Bearer throttled', 'x-request-id': 'trace-same' }, body: '{}' };
        const fromLane = await send(port, outgoing);
        const fromFastify = await send((reference.server.address() as AddressInfo).port, outgoing);
        const comparable = ({ status, headers, body }: Sent) => {
          const { date: _date, ...rest } = headers;
          return { status, headers: rest, body };
        };
        expect(comparable(fromLane)).toEqual(comparable(fromFastify));
      } finally {
        await reference.close();
      }
    });
  });

  describe('hands over to fastify what fails without being a refusal', () => {
    // [description, Authorization]
    const failures: Array<[string, string]> = [
      ['the store is down (the promise rejects with a 503)', 'Bearer store-down'],
      ['a bug (authorize throws what is not a GatewayError)', 'Bearer broken'],
    ];

    it.each(failures)('%s', async (_what, authorization) => {
      const { port, fallback, forwardedIds, logLines } = await begin();
      const response = await send(port, { method: 'POST', path: '/api/v1/agents/7/events', headers: { authorization, 'x-request-id': 'trace-13' }, body: '{}' });
      await settle(origin, 1, 100);
      expect(response.status).toBe(FALLBACK_STATUS);
      expect(fallback).toEqual([{ requestId: 'trace-13', error: expect.any(Error) }]);
      expect(forwardedIds).toEqual([]);
      expect(origin.received).toEqual([]);
      expect(logLines).toEqual([]);
    });
  });

  describe('leaves everything else to fastify untouched: no hand-over, no decision', () => {
    const cached = 'Bearer cached';
    // [description, request as http.request sends it, or raw bytes]
    const untouched: Array<[string, Outgoing | string]> = [
      ['an own path', { path: '/api/v1/api-keys', headers: { authorization: cached } }],
      ['an own path with a query string', { path: '/api/v1/api-keys?x=1', headers: { authorization: cached } }],
      ['an own path, HEAD (fastify\'s HEAD route)', { method: 'HEAD', path: '/api/v1/api-keys', headers: { authorization: cached } }],
      ['an own path, a method it refuses with 405', { method: 'PUT', path: '/api/v1/api-keys', headers: { authorization: cached }, body: '{}' }],
      ['the MCP path', { method: 'POST', path: '/mcp', headers: { authorization: cached }, body: '{}' }],
      ['a declared body one byte over BODY_LIMIT', { method: 'POST', path: '/api/v1/agents/7/events', headers: { authorization: cached }, body: 'x'.repeat(BODY_LIMIT + 1) }],
      ['an encoded dot-dot', { path: '/a/%2e%2e/b', headers: { authorization: cached } }],
      ['a dot-dot', { path: '/a/../b', headers: { authorization: cached } }],
      ['a leading double slash', { path: '//x', headers: { authorization: cached } }],
      ['an encoded slash', { path: '/api/v1/agents%2F7/events', headers: { authorization: cached } }],
      ['a malformed escape', { path: '/api/v1/agents/%zz/events', headers: { authorization: cached } }],
      ['a method not forwarded (PROPFIND)', { method: 'PROPFIND', path: '/api/v1/agents/7/events', headers: { authorization: cached } }],
      ['a method not forwarded (TRACE)', { method: 'TRACE', path: '/api/v1/agents/7/events', headers: { authorization: cached } }],
      ['two Authorization headers', `GET /api/v1/agents/7/events HTTP/1.1\r\nHost: gw\r\nAuthorization: ${cached}\r\nAuthorization: ${cached}\r\nConnection: close\r\n\r\n`],
      ['two Authorization headers in other case', `GET /api/v1/agents/7/events HTTP/1.1\r\nHost: gw\r\nauthorization: ${cached}\r\nAUTHORIZATION: Bearer revoked\r\nConnection: close\r\n\r\n`],
      ['two Host headers', `GET /api/v1/agents/7/events HTTP/1.1\r\nHost: gw\r\nHost: other\r\nAuthorization: ${cached}\r\nConnection: close\r\n\r\n`],
      ['an absolute-form target', `GET http://127.0.0.1/api/v1/agents/7/events HTTP/1.1\r\nHost: gw\r\nAuthorization: ${cached}\r\nConnection: close\r\n\r\n`],
    ];

    it.each(untouched)('%s', async (_what, outgoing) => {
      const { port, authorizer, fallback, forwardedIds } = await begin();
      const status = typeof outgoing === 'string' ? (await rawRequest(port, outgoing)).status : (await send(port, outgoing)).status;
      await settle(origin, 1, 100);
      expect(status).toBe(FALLBACK_STATUS);
      expect(fallback).toEqual([undefined]);
      expect(authorizer.calls).toBe(0);
      expect(forwardedIds).toEqual([]);
      expect(origin.received).toEqual([]);
    });

    it('every request, once the lane is closing', async () => {
      const { port, authorizer, fallback } = await begin();
      expect((await send(port, { path: '/api/v1/agents/7/events', headers: { authorization: cached } })).status).toBe(200);
      lane.close();
      const response = await send(port, { path: '/api/v1/agents/7/events', headers: { authorization: cached } });
      await settle(origin, 2, 100);
      expect(response.status).toBe(FALLBACK_STATUS);
      expect(fallback).toEqual([undefined]);
      expect(authorizer.calls).toBe(1);
      expect(origin.received).toHaveLength(1);
    });
  });

  describe('hands a failed forward over to fastify before anything was sent', () => {
    let down: Upstream;
    beforeAll(async () => {
      down = new Upstream({ url: `http://127.0.0.1:${await closedPort()}`, timeoutMs: 5_000 });
    });
    afterAll(async () => {
      await down?.close();
    });

    // [description, request]
    const failures: Array<[string, Outgoing]> = [
      ['a GET, with the client\'s request id', { path: '/api/v1/agents/7/events', headers: { 'x-request-id': 'trace-down' } }],
      ['a GET, with a request id the lane made', { path: '/api/v1/agents/7/events' }],
      ['a POST with a body', { method: 'POST', path: '/api/v1/agents/7/events', headers: { 'content-type': 'application/json' }, body: '{"a":1}' }],
      ['a chunked POST', { method: 'POST', path: '/api/v1/agents/7/events', body: '{"a":1}', chunked: true }],
    ];

    it.each(failures)('upstream down: %s', async (_what, outgoing) => {
      const { port, authorizer, fallback, forwardedIds } = await begin(down);
      const response = await send(port, { ...outgoing, headers: { authorization: 'Bearer cached', ...outgoing.headers } });
      expect(response.status).toBe(FALLBACK_STATUS);
      expect(authorizer.calls).toBe(1);
      expect(forwardedIds).toHaveLength(1);
      const [chosen] = forwardedIds;
      expect(chosen).toEqual(outgoing.headers?.['x-request-id'] ?? expect.stringMatching(UUID));
      expect(fallback).toHaveLength(1);
      expect(fallback[0]!.requestId).toBe(chosen);
      expect(fallback[0]!.error).toBeInstanceOf(GatewayError);
      expect(fallback[0]!.error).toMatchObject({ code: 'upstream_unavailable', status: 502 });
    });

    it('a chunked body past BODY_LIMIT: payload_too_large, and the upstream never receives a complete request', async () => {
      const { port, fallback } = await begin();
      const response = await send(port, {
        method: 'POST',
        path: '/api/v1/agents/7/events',
        headers: { authorization: 'Bearer cached', 'x-request-id': 'trace-big' },
        body: 'z'.repeat(BODY_LIMIT * 4),
        chunked: true,
      });
      await settle(origin, 1, 200);
      expect(response.status).toBe(FALLBACK_STATUS);
      expect(fallback).toHaveLength(1);
      expect(fallback[0]!.requestId).toBe('trace-big');
      expect(fallback[0]!.error).toMatchObject({ code: 'payload_too_large', status: 413 });
      expect(origin.received).toEqual([]);
    });
  });
});
