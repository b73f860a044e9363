import { ToolParamHeaders } from '../../../src/mcp/tool-param-headers.ts';
import { until as waitUntil } from '../../support/until.ts';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { generateKey } from '../../../src/credentials/key-format.ts';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { AnswerRelay } from '../../../src/mcp/answer-relay.ts';
import { ExchangeReplies, type Exchange } from '../../../src/mcp/mcp-exchange.ts';
import { RequestReading } from '../../../src/mcp/request-reading.ts';
import { MemorySessionBindings } from '../../../src/mcp/session-bindings.ts';
import { SessionGate } from '../../../src/mcp/session-gate.ts';
import type { Authenticable, Authentication } from '../../../src/pipeline/authenticate.ts';
import { RequestPipeline, type ObservedDecision } from '../../../src/pipeline/request-pipeline.ts';
import { deny } from '../../../src/policy/denial.ts';
import type { ApiKeyPrincipal } from '../../../src/policy/principal.ts';
import { compileRoutes } from '../../../src/policy/routes.ts';
import { ToolGrants } from '../../../src/policy/scopes.ts';
import { OpenStreams } from '../../../src/proxy/open-streams.ts';
import type { Inspect, Refuse, Upstream, UpstreamRequest } from '../../../src/proxy/upstream.ts';
import { clientResponseHeaders, IdentityHeaderValues } from '../../../src/proxy/upstream-headers.ts';
import { ALL_FEATURES, defaultTables, defaultYaml, LEGACY_PATHS, tablesFrom } from '../../unit/policy/support.ts';
import type { RateRule } from '../../../src/policy/rate-limits.ts';
import { LocalRateLimiter, type RateLimiter } from '../../../src/limits/rate-limiter.ts';

/**
 * The MCP parts against a fake upstream: real requests and responses (a local server and a
 * `node:http` client), the real pipeline, bindings and stream books; only the tool server is
 * canned.
 */

export const NOW = new Date('2030-06-01T12:00:00.000Z');
export const BODY_LIMIT = 256;

/** Two keys: A may call the `mcp:agents` tools, B those of `mcp:calls`. */
export const KEY_A = generateKey();
export const KEY_B = generateKey();
export const PRINCIPAL_A: ApiKeyPrincipal = { kind: 'api_key', keyId: 1, agentId: 7, scopes: ['mcp:agents'], expiresAt: null, revoked: false, disabled: false, rateLimit: null };
export const PRINCIPAL_B: ApiKeyPrincipal = { kind: 'api_key', keyId: 2, agentId: null, scopes: ['mcp:calls'], expiresAt: null, revoked: false, disabled: false, rateLimit: null };

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
export const JSON_POST = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** What the fake upstream answers: a status, headers and a body (an event stream's is sent chunk by chunk), or a failure. */
export type Canned = { status?: number; headers?: IncomingHttpHeaders; body?: string | readonly string[] | Readable } | { fail: GatewayError };

/** An `Upstream` as the MCP handler uses it: `relay`, answering with what the test canned. */
export class FakeUpstream {
  readonly received: UpstreamRequest[] = [];
  answer: (request: UpstreamRequest) => Canned = () => ({ status: 202, headers: {} });

  relay(response: ServerResponse, requestId: string, request: UpstreamRequest, refuse: Refuse, inspect?: Inspect): void {
    this.received.push(request);
    const canned = this.answer(request);
    if ('fail' in canned) {
      refuse(canned.fail);
      return;
    }
    const statusCode = canned.status ?? 200;
    const headers = canned.headers ?? {};
    const body = canned.body instanceof Readable ? canned.body : Readable.from([canned.body ?? ''].flat().map((chunk) => Buffer.from(chunk)), { objectMode: false });
    const take = inspect?.(statusCode, headers);
    if (take === undefined) {
      // As the real relay writes an answer passed on as it comes: the gateway's own fields instead of the upstream's.
      response.writeHead(statusCode, clientResponseHeaders(headers, requestId, request.answerHeaders, request.privateAnswer));
      body.pipe(response);
    } else if (typeof take === 'function') {
      take({ statusCode, headers, body });
    } else {
      void collect(body).then((whole) =>
        take.whole(whole.length > take.maxBytes ? new GatewayError('upstream_unavailable', 'too large') : { statusCode, headers, body: whole }),
      );
    }
  }

  /** As `McpOptions.upstream`: the handler uses nothing but `relay`. */
  asUpstream(): Upstream {
    return this as unknown as Upstream;
  }
}

async function collect(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A logger that keeps what it is told. */
export function recordingLog(): { log: FastifyBaseLogger; lines: Array<{ level: string; object: unknown; message: unknown }> } {
  const lines: Array<{ level: string; object: unknown; message: unknown }> = [];
  const at = (level: string) => (object: unknown, message?: unknown) => void lines.push({ level, object, message });
  const log = { level: 'info', fatal: at('fatal'), error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug'), trace: at('trace'), silent: () => {} } as unknown as FastifyBaseLogger;
  (log as unknown as { child: () => FastifyBaseLogger }).child = () => log;
  return { log, lines };
}

export interface BenchOptions {
  /** Counts the rate limits; default: in memory, on the frozen clock. */
  limiter?: RateLimiter;
  /** The tool table's `limits:`, and key A's own rate limit. */
  toolLimits?: Record<string, { requests: number; per_seconds: number }>;
  keyRateLimit?: RateRule;
  maxStreamsPerKey?: number;
  streamBindingRefreshMs?: number;
  maxFiltered?: number;
}

/** The real pipeline, bindings and stream books, the fake upstream, and the MCP parts built on them. */
export function bench(options: BenchOptions = {}) {
  const tables = options.toolLimits === undefined ? defaultTables() : tablesFrom({ tools: { ...defaultYaml().tools, limits: options.toolLimits } }, LEGACY_PATHS);
  const licence = { features: ALL_FEATURES };
  const observed: ObservedDecision[] = [];
  const principals = new Map([
    [KEY_A, { ...PRINCIPAL_A, rateLimit: options.keyRateLimit ?? null }],
    [KEY_B, PRINCIPAL_B],
  ]);
  const authenticator = {
    authenticate: (credential: Authenticable): Authentication => principals.get(credential.token) ?? deny('invalid_credential', 'Unknown key'),
  };
  const toolHeaders = new ToolParamHeaders();
  const pipeline = new RequestPipeline({
    routes: compileRoutes(tables),
    tables,
    authenticator,
    licence,
    now: () => NOW,
    limiter: options.limiter ?? new LocalRateLimiter({ now: () => NOW.getTime() }),
    observe: (decision) => void observed.push(decision),
    mcp: { allowedOrigins: new Set(['https://app.example']), toolHeaders },
  });
  const upstream = new FakeUpstream();
  const bindings = new MemorySessionBindings();
  const streams = new OpenStreams({ maxPerCredential: options.maxStreamsPerKey ?? 4, now: () => NOW });
  const { log, lines } = recordingLog();
  const grants = new ToolGrants(tables);
  const identity = new IdentityHeaderValues();
  const replies = new ExchangeReplies(pipeline, log);
  const sessions = new SessionGate(bindings, replies, options.streamBindingRefreshMs ?? 60_000);
  const relay = new AnswerRelay({
    upstream,
    forwardAuthorization: false,
    identity,
    grants,
    licence,
    streams,
    sessions,
    replies,
    log,
    maxFiltered: options.maxFiltered ?? 1024 * 1024,
    toolHeaders,
  });
  const reading = new RequestReading({ pipeline, replies, bodyLimit: BODY_LIMIT, maxBatch: 4 });

  /** The exchange of a request whose key the pipeline has allowed (the stub authenticates at once). */
  const exchangeOf = (request: IncomingMessage, response: ServerResponse, transport: Exchange['transport'] = 'streamable'): Exchange => {
    const started = performance.now();
    const path = new URL(request.url!, 'http://gateway.test').pathname;
    const verdict = pipeline.authorize(request, path, false);
    if (verdict instanceof Promise || !verdict.allow) throw new Error(`not allowed at once: ${JSON.stringify(verdict)}`);
    return { request, response, requestId: 'req-1', route: verdict.route, principal: verdict.principal as ApiKeyPrincipal, authorized: verdict, started, transport };
  };
  return { tables, licence, pipeline, toolHeaders, observed, upstream, bindings, streams, log, lines, grants, identity, replies, sessions, relay, reading, exchangeOf };
}

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** A local server whose requests go to `handle`, and a client for it. */
export class TestServer {
  handle: (request: IncomingMessage, response: ServerResponse) => void = (_request, response) => void response.writeHead(500).end();
  readonly #server: Server = createServer((request, response) => this.handle(request, response));
  #port = 0;

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.#port = (this.#server.address() as AddressInfo).port;
  }

  get port(): number {
    return this.#port;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  /** Sends a request; resolves with the response head as soon as it arrives (the body still to read). */
  open(method: string, path: string, headers: Record<string, string | string[]> = {}, body?: string | readonly string[]): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const request = httpRequest({ host: '127.0.0.1', port: this.#port, method, path, headers, agent: false }, resolve).on('error', reject);
      for (const chunk of [body ?? []].flat()) request.write(chunk);
      request.end();
    });
  }

  /** Sends a request and reads the whole answer. */
  async call(method: string, path: string, headers: Record<string, string | string[]> = {}, body?: string | readonly string[]): Promise<Answer> {
    const response = await this.open(method, path, headers, body);
    let text = '';
    for await (const chunk of response) text += (chunk as Buffer).toString();
    return { status: response.statusCode!, headers: response.headers, text };
  }
}

/** The JSON-RPC error of a refusal: its id, its number and its stable code. */
export function rpcErrorOf(text: string): { id: unknown; code: number; dataCode: string; status: number } {
  const body = JSON.parse(text) as { id: unknown; error: { code: number; data: { code: string; status: number } } };
  return { id: body.id, code: body.error.code, dataCode: body.error.data.code, status: body.error.data.status };
}

/** The value of a header in the flat `[name, value, …]` list the upstream received. */
export function headerOf(headers: readonly string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() === name) values.push(headers[i + 1]!);
  return values;
}

/** Polls `condition` until it holds (test/support/until.ts), with its generous deadline. */
export const until = (condition: () => boolean): Promise<void> => waitUntil(condition);
