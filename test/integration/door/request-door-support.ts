/**
 * What the RequestDoor tests share (request-door-*.test.ts): a real upstream and forwarder
 * behind the door; a stub pipeline, MCP handler, own endpoints and fastify in front of it.
 */
import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import type { OwnEndpoints } from '../../../src/door/own-endpoints.ts';
import { RequestDoor } from '../../../src/door/request-door.ts';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
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

export const BODY_LIMIT = 64;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** What the stub fastify answers with, and the stub MCP handler: nothing else in these tests sends them. */
export const FASTIFY_STATUS = 299;
export const MCP_STATUS = 298;
export const EVENTS = '/api/v1/agents/7/events';
export const PROBLEM_JSON = 'application/problem+json; charset=utf-8';
/** The paths the stub `ownEndpoints` says fastify serves (query strings aside). */
const OWN_PATHS = new Set(['/api/v1/api-keys', '/api/v1/auth/login', '/docs']);
export const MCP_PATH = '/mcp';

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
export const ALLOWED: Authorized = { allow: true, route, params: {}, principal };

/** A promise settled on the next turn of the event loop: a decision that needed I/O. */
function later<T>(settle: (resolve: (value: T) => void, reject: (error: unknown) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => setImmediate(() => settle(resolve, reject)));
}

/**
 * The stub pipeline, deciding by `Authorization`: allowed at once or after a promise, refused at
 * once or after a promise (a `Deny`), a failure (a rejected promise), a bug (a throw);
 * `Bearer held` waits until the test settles it.
 */
export class StubPipeline {
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

export interface DoorServer {
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

export interface Sent {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Outgoing {
  method?: string;
  /** The request target, sent byte for byte. */
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** Send the body with `Transfer-Encoding: chunked` instead of a Content-Length. */
  chunked?: boolean;
}

/** One request on a fresh connection, with exactly the target and headers given. */
export function send(port: number, { method = 'GET', path, headers = {}, body, chunked = false }: Outgoing): Promise<Sent> {
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

export interface Exchanged {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends exact bytes and reads until the server closes the connection (rejects if it does not). */
export function untilClosed(port: number, bytes: string, timeoutMs = 15_000): Promise<Exchanged> {
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

export function upgradeRequest(path: string, headers: Record<string, string>, upgrade = 'websocket'): string {
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
export async function closedPort(): Promise<{ port: number; release: () => Promise<void> }> {
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

/** The door fixture of a test file: its hooks registered in the calling describe. */
export interface DoorFixture {
  /** The origin behind the upstream (started before the file's tests). */
  readonly origin: Origin;
  readonly upstream: Upstream;
  /** Fastify's own logger (pino): the door logs through it. */
  readonly logger: FastifyInstance;
  /** Every line the door logged since `begin`. */
  readonly logLines: Array<Record<string, unknown>>;
  /** A door in front of `through` (the shared upstream unless given), closed after each test. */
  startDoor(through?: Upstream): Promise<DoorServer>;
  /** The origin's and the log's records cleared, then a door started. */
  begin(through?: Upstream): Promise<DoorServer>;
  /** See `receivedBesidesBarrier` below. */
  receivedBesidesBarrier(port: number, path?: string): Promise<ReceivedRequest[]>;
}

/** Registers the file's hooks (an origin and upstream for all its tests; every door closed after each). */
export function useDoor(): DoorFixture {
  let origin: Origin | undefined;
  let upstream: Upstream | undefined;
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
  async function startDoor(through: Upstream = upstream!): Promise<DoorServer> {
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

  const begin = async (through: Upstream = upstream!): Promise<DoorServer> => {
    origin!.clear();
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
    const at = origin!.received.findIndex((request) => request.body.includes(marker));
    expect(at, 'the barrier request reached the origin').not.toBe(-1);
    return origin!.received.filter((_, index) => index !== at);
  }

  return {
    get origin() {
      return origin!;
    },
    get upstream() {
      return upstream!;
    },
    get logger() {
      return logger;
    },
    logLines,
    startDoor,
    begin,
    receivedBesidesBarrier,
  };
}

/** A problem+json answer of the door: its status, code, request id and length. */
export function expectProblem(response: Sent | Exchanged, status: number, code: string, requestId: string | RegExp): string {
  const id = String(response.headers['x-request-id']);
  if (typeof requestId === 'string') expect(id).toBe(requestId);
  else expect(id).toMatch(requestId);
  expect(response.status).toBe(status);
  expect(response.headers['content-type']).toBe(PROBLEM_JSON);
  expect(response.headers['content-length']).toBe(String(Buffer.byteLength(response.body)));
  expect(JSON.parse(response.body)).toMatchObject({ status, code, instance: id, type: `https://gatehouse.dev/problems/${code.replaceAll('_', '-')}` });
  return id;
}

export const refusedLine = (reqId: string, code: string, status: number) => expect.objectContaining({ level: 30, reqId, code, status, msg: 'request refused' });
export const failedLine = (reqId: string) => expect.objectContaining({ level: 50, reqId, msg: 'request failed', err: expect.objectContaining({ message: expect.any(String) }) });