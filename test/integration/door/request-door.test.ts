import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import type { OwnEndpoints } from '../../../src/door/own-endpoints.ts';
import { RequestDoor } from '../../../src/door/request-door.ts';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { errorHandler } from '../../../src/http/error-handler.ts';
import { installLingeringClose } from '../../../src/http/lingering-close.ts';
import type { McpHandler } from '../../../src/mcp/mcp-handler.ts';
import type { Authorized, RequestPipeline, Verdict } from '../../../src/pipeline/request-pipeline.ts';
import { deny } from '../../../src/policy/denial.ts';
import type { ApiKeyPrincipal } from '../../../src/policy/principal.ts';
import type { CompiledRoute } from '../../../src/policy/routes.ts';
import { Forwarder } from '../../../src/proxy/forward.ts';
import { OpenStreams } from '../../../src/proxy/open-streams.ts';
import { Upstream } from '../../../src/proxy/upstream.ts';
import { IdentityHeaderValues } from '../../../src/proxy/upstream-headers.ts';
import { StoreUnavailableError } from '../../../src/store/unavailable.ts';
import { startOrigin, type Origin, type ReceivedRequest } from '../../support/origin.ts';
import { rawRequest } from '../../support/raw-http.ts';

const BODY_LIMIT = 64;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** What the stub fastify answers with, and the stub MCP handler: nothing else in these tests sends them. */
const FASTIFY_STATUS = 299;
const MCP_STATUS = 298;
const EVENTS = '/api/v1/agents/7/events';
const PROBLEM_JSON = 'application/problem+json; charset=utf-8';
/** The paths the stub `ownEndpoints` says fastify serves (query strings aside). */
const OWN_PATHS = new Set(['/api/v1/api-keys', '/api/v1/auth/login', '/docs']);
const MCP_PATH = '/mcp';

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
const principal: ApiKeyPrincipal = { kind: 'api_key', keyId: 42, agentId: 7, scopes: ['events:write'], expiresAt: null, revoked: false, disabled: false, rateLimit: null };
const ALLOWED: Authorized = { allow: true, route, params: {}, principal };

/** A promise settled on the next turn of the event loop: a decision that needed I/O. */
function later<T>(settle: (resolve: (value: T) => void, reject: (error: unknown) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => setImmediate(() => settle(resolve, reject)));
}

/**
 * The stub pipeline, deciding by `Authorization`: allowed at once or after a promise, refused at
 * once or after a promise (a `Deny`), a failure (a rejected promise), a bug (a throw);
 * `Bearer held` waits until the test settles it.
 */
class StubPipeline {
  readonly calls: Array<{ authorization: string | undefined; path: string }> = [];
  readonly held: Array<{ request: IncomingMessage; settle: (verdict: Verdict) => void; fail: (error: unknown) => void }> = [];
  /** The refusals the door counted itself (a target or headers read two ways). */
  readonly observed: Array<{ code: string | undefined }> = [];

  observe(_request: IncomingMessage, _route: string | undefined, outcome: { allowed: boolean; code: string | undefined }): void {
    this.observed.push({ code: outcome.code });
  }

  authorize(request: IncomingMessage, path: string): Verdict | Promise<Verdict> {
    const authorization = request.headers.authorization;
    this.calls.push({ authorization, path });
    switch (authorization) {
      case 'Bearer cached':
        return ALLOWED;
      case 'Bearer cold':
        return later((resolve) => resolve(ALLOWED));
      case 'Bearer held':
        return new Promise((settle, fail) => this.held.push({ request, settle, fail }));
      case 'Bearer revoked':
        return deny('revoked_credential', 'The API key was revoked');
      case 'Bearer throttled':
        return deny('rate_limited', 'Too many failed attempts for this key prefix', { retryAfter: 42 });
      case 'Bearer scopeless':
        return deny('insufficient_scope', 'The API key lacks the scope this route needs', { scope: 'events:write' });
      case 'Bearer wrong-method':
        return deny('method_not_allowed', 'Use GET or POST on this path', { allowedMethods: ['GET', 'POST'] });
      case 'Bearer bad-param':
        return deny('validation_failed', 'The path parameter agent_id is bad', { errors: [{ field: 'agent_id', message: 'must be a positive decimal integer' }] });
      case 'Bearer cold-refused':
        return later((resolve) => resolve(deny('invalid_credential', 'The API key is not valid')));
      case 'Bearer cold-throttled':
        return later((resolve) => resolve(deny('rate_limited', 'Too many failed attempts for this key prefix', { retryAfter: 7 })));
      case 'Bearer store-down':
        return later((_resolve, reject) => reject(new GatewayError('store_unavailable', 'The store cannot be reached; retry later')));
      case 'Bearer store-error':
        return later((_resolve, reject) => reject(new StoreUnavailableError(new Error('ECONNREFUSED'))));
      case 'Bearer broken':
        throw new TypeError('a bug in the pipeline');
      case 'Bearer broken-later':
        return later((_resolve, reject) => reject(new TypeError('a later bug in the pipeline')));
      case undefined:
        return deny('missing_credential', 'No credential');
      default:
        return deny('invalid_credential', 'The API key is not valid');
    }
  }
}

interface DoorServer {
  port: number;
  door: RequestDoor;
  pipeline: StubPipeline;
  /** What fastify's handler got: every request the door passed on untouched. */
  fastifyGot: Array<{ method: string; url: string }>;
  /** What the MCP handler got. */
  mcpGot: Array<{ method: string; url: string; requestId: string; path: string }>;
  /** Every request target the door asked `ownEndpoints` about. */
  ownAsked: string[];
  /** The request id the door forwarded each request with. */
  forwardedIds: string[];
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

interface Exchanged {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends exact bytes and reads until the server closes the connection (rejects if it does not). */
function untilClosed(port: number, bytes: string, timeoutMs = 15_000): Promise<Exchanged> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server did not close the connection: ${Buffer.concat(chunks).toString('latin1')}`));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const headEnd = text.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = text.slice(0, headEnd === -1 ? text.length : headEnd).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) headers[line.slice(0, line.indexOf(':')).trim().toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
      const body = headEnd === -1 ? '' : text.slice(headEnd + 4);
      resolve({ status: Number(statusLine.split(' ')[1] ?? 0), headers, body: headers['content-length'] === undefined ? body : body.slice(0, Number(headers['content-length'])) });
    });
    socket.write(bytes);
  });
}

function upgradeRequest(path: string, headers: Record<string, string>, upgrade = 'websocket'): string {
  const lines = [`GET ${path} HTTP/1.1`, 'Host: gw', 'Connection: Upgrade', `Upgrade: ${upgrade}`, 'Sec-WebSocket-Version: 13', `Sec-WebSocket-Key: ${randomUUID().slice(0, 22)}==`];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/**
 * A closed port that stays closed: the local port of a connection this process holds open.
 * Nothing listens on it, so a connection to it is refused, and no server (of this process or
 * another) can be given it by `listen(0)` while the connection holds it — unlike a port bound
 * and closed again, which the next `listen(0)` (a door of these tests) may be handed.
 */
async function closedPort(): Promise<{ port: number; release: () => Promise<void> }> {
  const holder = createNetServer((socket) => socket.on('error', () => {}));
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const client = connect((holder.address() as AddressInfo).port, '127.0.0.1');
  client.on('error', () => {});
  await new Promise<void>((resolve) => client.once('connect', resolve));
  return {
    port: client.localPort!,
    release: () =>
      new Promise<void>((resolve) => {
        client.destroy();
        holder.close(() => resolve());
      }),
  };
}

describe('RequestDoor (real upstream and forwarder; stub pipeline, MCP handler, own endpoints and fastify)', () => {
  let origin: Origin;
  let upstream: Upstream;
  /** Fastify's own logger (pino), writing into logLines. */
  let logger: FastifyInstance;
  const logLines: Array<Record<string, unknown>> = [];
  const running: Array<{ server: Server; sockets: Set<Socket> }> = [];

  beforeAll(async () => {
    origin = await startOrigin();
    upstream = new Upstream({ url: origin.url, timeoutMs: 5_000 });
    logger = Fastify({ logger: { level: 'info', stream: { write: (line: string) => logLines.push(JSON.parse(line) as Record<string, unknown>) } } });
  });
  afterAll(async () => {
    await upstream?.close();
    await origin?.close();
    await logger?.close();
  });
  afterEach(async () => {
    for (const { server, sockets } of running.splice(0)) {
      // Upgraded sockets are no longer the server's to close: every connection is ended here.
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  /** A door in front of `through`, served on port 0 with the public server's lingering close. */
  async function startDoor(through: Upstream = upstream): Promise<DoorServer> {
    const pipeline = new StubPipeline();
    const fastifyGot: DoorServer['fastifyGot'] = [];
    const mcpGot: DoorServer['mcpGot'] = [];
    const ownAsked: string[] = [];
    const forwardedIds: string[] = [];
    const streams = new OpenStreams({ maxPerCredential: 16, now: () => new Date() });
    class RecordingForwarder extends Forwarder {
      override forward(...args: Parameters<Forwarder['forward']>): void {
        forwardedIds.push(args[2]);
        super.forward(...args);
      }
    }
    const mcp: McpHandler = {
      paths: new Set([MCP_PATH]),
      serves: (path) => path === MCP_PATH,
      serve: (request, response, requestId, path) => {
        mcpGot.push({ method: request.method!, url: request.url!, requestId, path });
        request.resume();
        response.writeHead(MCP_STATUS, { 'x-request-id': requestId }).end();
      },
      upgradeRefusal: () => deny('bad_request', 'MCP paths take no upgrade: MCP runs over plain HTTP requests'),
    };
    const ownEndpoints = {
      serves: (url: string) => {
        ownAsked.push(url);
        return OWN_PATHS.has(url.split('?')[0]!);
      },
    };
    const door = new RequestDoor({
      ownEndpoints: ownEndpoints as unknown as OwnEndpoints,
      fastify: (request: IncomingMessage, response: ServerResponse) => {
        fastifyGot.push({ method: request.method!, url: request.url! });
        request.resume();
        response.writeHead(FASTIFY_STATUS, { 'x-answered-by': 'fastify' }).end();
      },
      pipeline: pipeline as unknown as RequestPipeline,
      forwarder: new RecordingForwarder({ upstream: through, forwardAuthorization: false, bodyLimit: BODY_LIMIT, streams, identity: new IdentityHeaderValues() }),
      mcp,
      bodyLimit: BODY_LIMIT,
      log: logger.log,
    });
    const server = createServer(door.listener);
    server.on('upgrade', door.upgrade);
    installLingeringClose(server, 2_000);
    const sockets = new Set<Socket>();
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    running.push({ server, sockets });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as AddressInfo).port, door, pipeline, fastifyGot, mcpGot, ownAsked, forwardedIds };
  }

  const begin = async (through: Upstream = upstream): Promise<DoorServer> => {
    origin.clear();
    logLines.length = 0;
    return startDoor(through);
  };

  /**
   * The barrier for "nothing reached the origin": an allowed request on `path` through the door
   * on `port`, answered 200, so anything the door forwarded before it has arrived too. Resolves
   * with everything else the origin received (before it or since).
   */
  async function receivedBesidesBarrier(port: number, path = EVENTS): Promise<ReceivedRequest[]> {
    const marker = randomUUID();
    const response = await send(port, { method: 'POST', path, headers: { authorization: 'Bearer cached', 'content-type': 'application/json' }, body: JSON.stringify({ barrier: marker }) });
    expect(response.status, 'the barrier request').toBe(200);
    const at = origin.received.findIndex((request) => request.body.includes(marker));
    expect(at, 'the barrier request reached the origin').not.toBe(-1);
    return origin.received.filter((_, index) => index !== at);
  }

  /** A problem+json answer of the door: its status, code, request id and length. */
  function expectProblem(response: Sent | Exchanged, status: number, code: string, requestId: string | RegExp): string {
    const id = String(response.headers['x-request-id']);
    if (typeof requestId === 'string') expect(id).toBe(requestId);
    else expect(id).toMatch(requestId);
    expect(response.status).toBe(status);
    expect(response.headers['content-type']).toBe(PROBLEM_JSON);
    expect(response.headers['content-length']).toBe(String(Buffer.byteLength(response.body)));
    expect(JSON.parse(response.body)).toMatchObject({ status, code, instance: id, type: `https://gatehouse.dev/problems/${code.replaceAll('_', '-')}` });
    return id;
  }

  const refusedLine = (reqId: string, code: string, status: number) => expect.objectContaining({ level: 30, reqId, code, status, msg: 'request refused' });
  const failedLine = (reqId: string) => expect.objectContaining({ level: 50, reqId, msg: 'request failed', err: expect.objectContaining({ message: expect.any(String) }) });

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
      const response = await send(port, { path: EVENTS, headers });
      expect(response.status).toBe(200);
      const answered = response.headers['x-request-id'];
      if (expected === undefined) expect(answered).toMatch(UUID);
      else expect(answered).toBe(expected);
      expect(origin.received).toHaveLength(1);
      expect(origin.received[0]!.headers['x-request-id']).toBe(answered);
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
      expect(origin.received).toHaveLength(1);
      expect(origin.received[0]).toMatchObject({ method: 'POST', url: EVENTS, body: '{"a":1}' });
      expect(origin.received[0]!.headers).toMatchObject({ 'x-auth-kind': 'api_key', 'x-auth-key-id': '42' });
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
      expect(origin.received.filter((request) => request.body === '{"held":1}')).toHaveLength(1);
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

    // Not among the stub's own paths, but reserved (src/door/reserved-paths.ts): fastify's too.
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

  describe('tunnels an allowed WebSocket upgrade; refuses one that is not', () => {
    it.each([
      ['allowed at once', 'Bearer cached'],
      ['allowed after a promise', 'Bearer cold'],
    ])('%s: the origin sees the upgrade, and messages go both ways', async (_what, authorization) => {
      const { port, pipeline, forwardedIds } = await begin();
      const path = `${EVENTS}/live?since=1`;
      const socket = new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers: { authorization, 'x-request-id': 'trace-ws' } });
      const upgraded = new Promise<IncomingMessage>((resolve) => socket.once('upgrade', resolve));
      const echoed = new Promise<string>((resolve, reject) => {
        socket.once('open', () => socket.send('hello'));
        socket.once('message', (data: Buffer) => resolve(data.toString()));
        socket.once('error', reject);
      });
      try {
        expect(await echoed).toBe('echo: hello');
        expect((await upgraded).headers['x-request-id']).toBe('trace-ws');
      } finally {
        socket.terminate();
      }
      expect(pipeline.calls).toEqual([{ authorization, path: `${EVENTS}/live` }]);
      expect(forwardedIds).toEqual(['trace-ws']);
      expect(origin.received).toHaveLength(1);
      expect(origin.received[0]).toMatchObject({ method: 'GET', url: path, body: 'websocket' });
      expect(origin.received[0]!.headers).toMatchObject({ upgrade: 'websocket', 'x-auth-kind': 'api_key', 'x-auth-key-id': '42', 'x-request-id': 'trace-ws' });
      expect(origin.received[0]!.headers.authorization).toBeUndefined();
      expect(logLines).toEqual([]);
    });

    // [description, Authorization, Upgrade, status, code]
    const refused: Array<[string, string, string, number, string]> = [
      ['refused at once', 'Bearer revoked', 'websocket', 401, 'revoked_credential'],
      ['refused after a promise', 'Bearer cold-refused', 'websocket', 401, 'invalid_credential'],
      ['a failure (the store is down)', 'Bearer store-down', 'websocket', 503, 'store_unavailable'],
      ['allowed, but not a WebSocket upgrade', 'Bearer cached', 'h2c', 400, 'bad_request'],
    ];

    it.each(refused)('%s: its problem+json, and the connection closed', async (_what, authorization, upgrade, status, code) => {
      const { port, pipeline, fastifyGot, forwardedIds } = await begin();
      const response = await untilClosed(port, upgradeRequest(`${EVENTS}/live`, { Authorization: authorization, 'X-Request-Id': 'trace-ws-refused' }, upgrade));
      expectProblem(response, status, code, 'trace-ws-refused');
      if (status === 401) expect(response.headers['www-authenticate']).toMatch(/^Bearer realm="gatehouse", error="invalid_token"/);
      // An upgrade to anything but WebSocket is refused before any decision: no verification is spent on it.
      expect(pipeline.calls).toHaveLength(upgrade === 'websocket' ? 1 : 0);
      expect(fastifyGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(logLines).toEqual([status >= 500 ? failedLine('trace-ws-refused') : refusedLine('trace-ws-refused', code, status)]);
      expect(await receivedBesidesBarrier(port, `${EVENTS}/live`)).toEqual([]);
    });
  });
});
