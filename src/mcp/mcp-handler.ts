import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { DEFAULTS } from '../config/env.ts';
import type { McpTransport, Tables } from '../config/tables.ts';
import { sendError, toGatewayError } from '../http/error-handler.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { decide, type Licence } from '../policy/decide.ts';
import type { ApiKeyPrincipal } from '../policy/principal.ts';
import type { CompiledRoute } from '../policy/routes.ts';
import { allowedTools } from '../policy/scopes.ts';
import { noRouteMatches, presentedCredentialKind, type Authorization, type Authorized, type ObservedDecision } from '../proxy/authorize.ts';
import { takeHandOver } from '../proxy/hand-over.ts';
import type { OpenStreams } from '../proxy/open-streams.ts';
import { parseRequestTarget } from '../proxy/request-target.ts';
import type { Upstream, UpstreamResponse, WholeAnswer } from '../proxy/upstream.ts';
import { forwardContextOf, upstreamHeaderRewriter } from '../proxy/upstream-headers.ts';
import { toolsListIdsOf } from './answer-inspection.ts';
import { assertJsonBodyHeaders, parseJsonRpcBody, type JsonRpcBody } from './json-rpc-body.ts';
import { answerTypeOf } from './media-type.ts';
import { mcpRefusalResponse, mcpRequestRefusal, type McpRefusal, type McpRefusalResponse } from './json-rpc-error.ts';
import type { SessionBindings } from './session-bindings.ts';
import { isSessionId, legacyBinding, legacySessionIdOfEndpoint, legacySessionIdOfQuery, presentedSessionId, streamableBinding } from './session-ids.ts';
import { createSseFilter } from './sse-filter.ts';
import { hasNoBody, isIdentityEncoding, sendCheckedAnswer, writeAnswerHead } from './upstream-answer.ts';

export interface McpOptions {
  /** The one way to the upstream, shared with the generic forwarding. */
  upstream: Upstream;
  forwardAuthorization: boolean;
  /** Largest JSON-RPC body read, in bytes (`BODY_LIMIT`). */
  bodyLimit: number;
  /** Messages one JSON-RPC batch may hold (`MCP_MAX_BATCH`); more is one `400 batch_too_large`. */
  maxBatch?: number;
  tables: Tables;
  licence: Licence;
  now: () => Date;
  /** Credential and route check, before any body is read (`createAuthorizer`, without its own `observe`). */
  authorize: (request: IncomingMessage, path: string) => Authorization;
  bindings: SessionBindings;
  /** Failures logged with the request id (fastify's logger). */
  log: FastifyBaseLogger;
  /** A GET's event stream is booked here against its key's cap, and cut when the key ends. */
  streams: OpenStreams;
  /** Told once per request of the final decision, message inspection included. */
  observe?: (decision: ObservedDecision) => void;
  /** Largest answer that is not an event stream held in memory to be inspected; a larger one is a 502. Default 16 MiB. */
  maxFilteredResponseBytes?: number;
  /** While a session's stream is open its binding is extended this often. Default 15 minutes. */
  streamBindingRefreshMs?: number;
}

/**
 * Answers a refusal of the credential or route check, before the key is known to be an MCP
 * key: problem+json as on every other path, or — a failure, not a refusal — handed to fastify's
 * error handler (the fast lane's `answerRefusal`).
 */
export type CredentialRefusal = (request: IncomingMessage, response: ServerResponse, requestId: string, error: unknown) => void;

export interface McpHandler {
  /** The MCP paths of the route table. */
  readonly paths: ReadonlySet<string>;
  /** Whether `path` (the request target's path, checked) is an MCP path. */
  serves(path: string): boolean;
  serve(request: IncomingMessage, response: ServerResponse, requestId: string, path: string, refuse: CredentialRefusal): void;
}

/** What each MCP transport serves; the route table may list fewer methods (then 405), never more. */
const SERVED_METHODS: Record<McpTransport, readonly string[]> = {
  streamable: ['POST', 'GET', 'DELETE'],
  sse: ['GET'],
  messages: ['POST'],
};

const DEFAULT_MAX_FILTERED_RESPONSE_BYTES = 16 * 1024 * 1024;
const DEFAULT_STREAM_BINDING_REFRESH_MS = 15 * 60_000;

/** One request on an MCP path, from the moment its key is known to be an API key. */
interface Exchange {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
  readonly requestId: string;
  readonly route: CompiledRoute;
  readonly principal: ApiKeyPrincipal;
  readonly started: number;
  readonly transport: McpTransport;
  body?: JsonRpcBody;
  /** The binding key of the session the request presented (`streamable:…`, `legacy:…`). */
  session?: string;
}

/**
 * Serves the MCP routes of the route table (`mcp: streamable | sse | messages`) from the
 * server's request listener, as the fast lane serves the other forwarded paths: the key is
 * checked before any body is read, every posted JSON-RPC message is decided before anything
 * reaches the tool server, the upstream receives the authorized messages re-serialised,
 * sessions are bound to the key that opened them, and `tools/list` results are filtered
 * (docs/mcp.md). Past the credential check every refusal is a
 * JSON-RPC error.
 */
export function createMcpHandler(options: McpOptions): McpHandler {
  const paths = mcpPathsOf(options.tables);
  const { upstream, bindings, log } = options;
  const maxFiltered = options.maxFilteredResponseBytes ?? DEFAULT_MAX_FILTERED_RESPONSE_BYTES;
  const refreshMs = options.streamBindingRefreshMs ?? DEFAULT_STREAM_BINDING_REFRESH_MS;
  const maxBatch = options.maxBatch ?? DEFAULTS.MCP_MAX_BATCH;
  const rewriteHeaders = upstreamHeaderRewriter({
    forwardAuthorization: options.forwardAuthorization,
    alsoDrop: ['content-length', 'content-type', 'content-encoding', 'accept-encoding'],
  });

  const observeDecision = (exchange: Exchange, allowed: boolean, code: ObservedDecision['code']) =>
    options.observe?.({ allowed, code, credential: 'api_key', route: exchange.route.name, seconds: (performance.now() - exchange.started) / 1000 });

  function serve(request: IncomingMessage, response: ServerResponse, requestId: string, path: string, refuse: CredentialRefusal): void {
    const { transport, routeName } = paths.get(path)!;
    const started = performance.now();
    const refuseCredential = (error: unknown) => {
      options.observe?.({
        allowed: false,
        code: error instanceof GatewayError ? error.code : 'internal_error',
        credential: presentedCredentialKind(request),
        route: routeName,
        seconds: (performance.now() - started) / 1000,
      });
      refuse(request, response, requestId, error);
    };
    const admit = ({ route, principal }: Authorized) => {
      if (principal?.kind !== 'api_key') {
        refuseCredential(new GatewayError('wrong_credential_type', 'The MCP server needs an API key'));
        return;
      }
      const exchange: Exchange = { request, response, requestId, route, principal, started, transport };
      guarded(exchange, inspect);
    };
    let authorization: Authorization;
    try {
      authorization = options.authorize(request, path);
    } catch (error) {
      refuseCredential(error);
      return;
    }
    // A cached key is decided without a promise, as on the fast lane.
    if (authorization instanceof Promise) authorization.then(admit, refuseCredential);
    else admit(authorization);
  }

  /** The method, then the body and every message in it: refused here, or on to the session check. */
  function inspect(exchange: Exchange): void {
    const { request } = exchange;
    const method = request.method!;
    const allowedMethods = SERVED_METHODS[exchange.transport];
    if (!allowedMethods.includes(method)) {
      refuseExchange(exchange, { code: 'method_not_allowed', detail: `This MCP path serves ${allowedMethods.join(', ')}`, allowedMethods });
      return;
    }
    if (method !== 'POST') {
      if (hasBody(request)) refuseExchange(exchange, { code: 'bad_request', detail: `A ${method} on an MCP path has no body` });
      else checkSession(exchange);
      return;
    }
    assertJsonBodyHeaders(request);
    readBody(exchange, (error, body) => {
      if (error !== undefined) failExchange(exchange, error);
      else guarded(exchange, () => decideMessages(exchange, body));
    });
  }

  /** Every message of the body, decided before any of them is forwarded. */
  function decideMessages(exchange: Exchange, body: Buffer): void {
    exchange.body = parseJsonRpcBody(body, { maxBatch });
    const decision = decide(
      { route: exchange.route, params: {}, principal: exchange.principal, licence: options.licence, now: options.now(), mcpMessages: exchange.body.messages },
      options.tables,
    );
    if (decision.allow) checkSession(exchange);
    else refuseExchange(exchange, decision);
  }

  /**
   * Runs a step of the exchange: whatever it throws (a refusal raised as a GatewayError, a
   * bug) is answered as a JSON-RPC error, never left to crash the process from a callback.
   */
  function guarded(exchange: Exchange, step: (exchange: Exchange) => void): void {
    try {
      step(exchange);
    } catch (error) {
      failExchange(exchange, error);
    }
  }

  /**
   * The body, up to `BODY_LIMIT` bytes. Past the limit the request is answered at once and its
   * connection closed (lingering, as the generic forwarding does), so the rest is never held.
   */
  function readBody(exchange: Exchange, done: (error: GatewayError | undefined, body: Buffer) => void): void {
    const { request, response } = exchange;
    const limit = options.bodyLimit;
    const tooLarge = () => {
      response.setHeader('connection', 'close');
      done(new GatewayError('payload_too_large', `The request body is larger than ${limit} bytes`), EMPTY);
    };
    const declared = request.headers['content-length'];
    if (declared !== undefined && Number(declared) > limit) {
      tooLarge();
      return;
    }
    if (request.destroyed) {
      // The client left while its key was verified.
      observeDecision(exchange, false, 'bad_request');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stop();
        tooLarge();
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      done(undefined, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    // The client went away mid-body: nothing to answer, nothing forwarded.
    const onClose = () => {
      stop();
      observeDecision(exchange, false, 'bad_request');
    };
    const stop = () => {
      request.off('data', onData).off('end', onEnd).off('close', onClose);
    };
    request.on('data', onData).on('end', onEnd).on('close', onClose);
  }

  /** The session the request presents must be bound to its key; then it is forwarded. */
  function checkSession(exchange: Exchange): void {
    const session = sessionOf(exchange.request, exchange.transport);
    if (session === undefined) {
      forward(exchange);
      return;
    }
    exchange.session = session;
    bindings.check(session, exchange.principal.keyId).then(
      (owner) => {
        if (owner === 'other_key') refuseExchange(exchange, { code: 'session_mismatch', detail: 'This MCP session was opened with another API key' });
        else if (owner === 'unknown') {
          refuseExchange(exchange, {
            code: 'not_found',
            detail: 'No such MCP session (it ended, expired or was not opened through this gateway): initialize a new one',
          });
        } else guarded(exchange, forward);
      },
      (error: unknown) => failExchange(exchange, error),
    );
  }

  /**
   * Sends the authorized request upstream. An answer without a body that leaves the session's
   * binding alone is relayed as it comes; any other is taken over by `respond`, as any body
   * may carry a tools list. An upstream failure is answered as a JSON-RPC error.
   */
  function forward(exchange: Exchange): void {
    const { request, response, requestId, body } = exchange;
    // A GET opens the session's (or the legacy transport's) event stream: long-lived, so booked
    // against the key's cap (a refusal thrown here is answered by `guarded`) and sent on the
    // streams' own connections. The key was checked asynchronously since `started`.
    const stream = request.method === 'GET';
    if (stream) {
      const release = options.streams.open(exchange.principal, () => response.destroy(), exchange.started);
      if (release === undefined) {
        // Cut at once: its key was evicted (or expired) while the request was decided.
        observeDecision(exchange, true, undefined);
        return;
      }
      response.once('close', release);
    }
    upstream.relay(
      response,
      requestId,
      {
        method: request.method!,
        path: request.url!,
        headers: upstreamHeaders(exchange),
        body: body === undefined ? null : body.serialized,
        route: exchange.route.name,
        stream,
      },
      (error) => failReply(exchange, error),
      (statusCode, headers) => {
        if (!changesSession(exchange, statusCode, headers) && hasNoBody(statusCode, headers)) return undefined;
        // An event stream is filtered as it comes; anything else is read whole (no stream between) and checked.
        if (answerTypeOf(headers['content-type']) === 'event-stream') {
          return (answer) => {
            respondStream(exchange, answer).catch((error: unknown) => {
              answer.body.destroy();
              failReply(exchange, error);
            });
          };
        }
        return {
          maxBytes: maxFiltered,
          whole: (answer) => {
            if (answer instanceof GatewayError) {
              failReply(exchange, answer);
              return;
            }
            try {
              respondWhole(exchange, answer);
            } catch (error) {
              failReply(exchange, error);
            }
          },
        };
      },
    );
    observeDecision(exchange, true, undefined);
  }

  function upstreamHeaders(exchange: Exchange): string[] {
    const { request } = exchange;
    const headers = rewriteHeaders(request.headers, forwardContextOf(request, exchange.principal, exchange.requestId));
    // The body sent is the re-serialised one (undici sets its length): nothing of how the client framed or encoded its own.
    if (exchange.body !== undefined) headers.push('content-type', 'application/json');
    // Responses are inspected (tools/list, the legacy endpoint event): they must arrive readable.
    headers.push('accept-encoding', 'identity');
    return headers;
  }

  /** Whether the answer opens or ends the session's binding (Streamable HTTP). */
  function changesSession(exchange: Exchange, statusCode: number, headers: IncomingHttpHeaders): boolean {
    if (exchange.transport !== 'streamable') return false;
    if (exchange.session === undefined) return statusCode < 300 && headers['mcp-session-id'] !== undefined;
    return statusCode === 404 || (exchange.request.method === 'DELETE' && statusCode < 300);
  }

  /** Binds the session the answer opens, or unbinds the one it ends (Streamable HTTP). */
  async function bookSession(exchange: Exchange, statusCode: number, headers: IncomingHttpHeaders): Promise<void> {
    if (exchange.transport !== 'streamable') return;
    if (exchange.session === undefined && headers['mcp-session-id'] !== undefined && statusCode < 300) {
      const issued = headerValue(headers['mcp-session-id']);
      if (issued === undefined || !isSessionId(issued) || !(await bindings.bind(streamableBinding(issued), exchange.principal.keyId))) {
        throw new GatewayError('upstream_unavailable', 'The upstream issued an MCP session id that cannot be bound');
      }
    } else if (exchange.session !== undefined && (statusCode === 404 || (exchange.request.method === 'DELETE' && statusCode < 300))) {
      await bindings.unbind(exchange.session);
    }
  }

  /** An event stream: the session booked, then its events filtered as they come. */
  async function respondStream(exchange: Exchange, answer: UpstreamResponse): Promise<void> {
    const { statusCode, headers } = answer;
    const { response, requestId } = exchange;
    await bookSession(exchange, statusCode, headers);
    if (!isIdentityEncoding(headers['content-encoding'])) {
      throw new GatewayError('upstream_unavailable', 'The upstream sent an encoded event stream the gateway cannot inspect');
    }
    if (exchange.request.method !== 'GET') {
      // A POST answered with a stream: cut with the key's other streams, but not counted, as a
      // client may have many requests answered at once (the GET that opened a stream was booked).
      const release = options.streams.open(exchange.principal, () => response.destroy(), undefined, false);
      if (release !== undefined) response.once('close', release);
    }
    writeAnswerHead(response, statusCode, headers, requestId);
    response.removeHeader('content-length');
    streamEvents(exchange, answer, allowedTools(exchange.principal, options.licence, options.tables));
  }

  /** Any other answer, read whole: the session booked (only when it changes: no promise otherwise), then checked and sent. */
  function respondWhole(exchange: Exchange, answer: WholeAnswer): void {
    const send = () => {
      const toolsListIds = exchange.body === undefined ? NO_IDS : toolsListIdsOf(exchange.body.messages);
      const allowed = allowedTools(exchange.principal, options.licence, options.tables);
      sendCheckedAnswer(exchange.response, exchange.requestId, answer, { rules: { allowed, toolsListIds }, acknowledgements: exchange.transport === 'messages' });
    };
    if (!changesSession(exchange, answer.statusCode, answer.headers)) {
      send();
      return;
    }
    bookSession(exchange, answer.statusCode, answer.headers).then(send).catch((error: unknown) => failReply(exchange, error));
  }

  function streamEvents(exchange: Exchange, answer: UpstreamResponse, allowed: ReadonlySet<string>): void {
    const keyId = exchange.principal.keyId;
    let legacySession: string | undefined;
    let dropped = 0;
    const filter = createSseFilter({
      allowed,
      // A POST's stream answers the posted requests only; a GET's may carry answers to any (a resumed stream, the legacy transport).
      toolsListIds: exchange.body === undefined ? undefined : toolsListIdsOf(exchange.body.messages),
      // The first drop is logged with its reason; the rest are counted and logged once when the
      // stream ends, so an upstream sending bad events cannot flood the log.
      onDropped: (reason) => {
        if (dropped++ === 0) log.warn({ reqId: exchange.requestId, reason }, 'An event of the upstream was not passed on');
      },
      ...(exchange.transport === 'sse'
        ? {
            onEndpoint: async (data: string) => {
              const id = legacySessionIdOfEndpoint(data);
              if (id === undefined || legacySession !== undefined) throw new Error('The upstream sent an endpoint event naming no single session');
              if (!(await bindings.bind(legacyBinding(id), keyId))) throw new Error('The legacy session is bound to another key');
              legacySession = legacyBinding(id);
            },
          }
        : {}),
    });
    // While the stream is open its session is in use: keep the binding from expiring.
    const refresh = setInterval(() => {
      const session = legacySession ?? exchange.session;
      if (session !== undefined) bindings.check(session, keyId).catch(() => {});
    }, refreshMs);
    refresh.unref();
    // The client sees the headers at once, before the first event.
    exchange.response.flushHeaders();
    pipeline(answer.body, filter, exchange.response, () => {
      clearInterval(refresh);
      if (dropped > 1) log.warn({ reqId: exchange.requestId, dropped }, 'Events of the upstream were not passed on');
      // The legacy session ends with its stream.
      if (legacySession !== undefined) bindings.unbind(legacySession).catch(() => {});
    });
  }

  /** A refusal of the request's method, body, messages or session: nothing was forwarded. */
  function refuseExchange(exchange: Exchange, refusal: McpRefusal): void {
    observeDecision(exchange, false, refusal.code);
    send(exchange, mcpRefusalResponse(refusal, exchange.body?.messages, exchange.body?.batch));
  }

  /**
   * A refusal or failure before forwarding, raised as an error. A GatewayError (an unreadable
   * body, two session ids, the bindings' store down) is a refusal like the others, answering
   * the messages' ids when the body was parsed; anything else is a failure, logged.
   */
  function failExchange(exchange: Exchange, error: unknown): void {
    if (error instanceof GatewayError) {
      refuseExchange(exchange, { code: error.code, detail: error.message, scope: error.scope, allowedMethods: error.allow });
      return;
    }
    observeDecision(exchange, false, toGatewayError(error as Error).code);
    failReply(exchange, error);
  }

  /** A failure (after forwarding began, or before it and not a refusal): any headers set are dropped, the JSON-RPC error is sent instead. */
  function failReply(exchange: Exchange, error: unknown): void {
    const { response } = exchange;
    if (response.headersSent) {
      response.destroy();
      return;
    }
    const gatewayError = toGatewayError(error as Error);
    if (gatewayError.status >= 500) log.error({ reqId: exchange.requestId, err: error }, 'MCP request failed');
    for (const name of response.getHeaderNames()) response.removeHeader(name);
    send(exchange, mcpRequestRefusal(gatewayError));
  }

  function send({ request, response, requestId }: Exchange, answer: McpRefusalResponse): void {
    if (response.destroyed) return;
    if (response.headersSent) {
      response.destroy();
      return;
    }
    for (const name in answer.headers) response.setHeader(name, answer.headers[name]!);
    // Refused before its body was read: Node would read all of it on a kept-alive connection, so
    // the connection ends with the answer instead (lingering, so the answer still arrives).
    if (!request.complete && hasBody(request)) response.setHeader('connection', 'close');
    response.setHeader('x-request-id', requestId);
    response.setHeader('content-length', Buffer.byteLength(answer.body));
    response.statusCode = answer.status;
    response.end(answer.body);
  }

  return { paths: new Set(paths.keys()), serves: (path) => paths.has(path), serve };
}

/**
 * The MCP paths as fastify routes, for the requests that reach fastify's router without the
 * server's request listener: those on a second address `HOST` resolves to (`localhost`: one
 * server per address, each routing straight to fastify). Fastify's own checks have run (the
 * request id, one of each header, 503 while closing); the handler answers the rest itself.
 */
export function registerMcpRoutes(app: FastifyInstance, handler: McpHandler): void {
  const refuse: CredentialRefusal = (_request, response, requestId, error) => sendError(response, error, requestId, app.log);
  for (const path of handler.paths) {
    app.route({
      method: app.supportedMethods,
      // A literal `:` would start a parameter in fastify's route syntax; `::` is the colon itself.
      url: path.replaceAll(':', '::'),
      exposeHeadRoute: false,
      onRequest: (request, reply, done) => {
        const handedOver = takeHandOver(request.raw);
        if (handedOver !== undefined) {
          // The listener decided (and counted) it already: only the answer is fastify's.
          done(handedOver.error);
          return;
        }
        reply.hijack();
        // Fastify's router decodes the path it matches (`/%6dcp` finds `/mcp`): the target as
        // received must be exactly the MCP path, as the listener requires.
        let target: string;
        try {
          target = parseRequestTarget(request.raw.url!).path;
        } catch (error) {
          refuse(request.raw, reply.raw, request.id, error);
          return;
        }
        if (target !== path) refuse(request.raw, reply.raw, request.id, noRouteMatches());
        else handler.serve(request.raw, reply.raw, request.id, path, refuse);
      },
      handler: () => {
        throw new GatewayError('internal_error', 'The MCP request was not served');
      },
    });
  }
}

const EMPTY = Buffer.alloc(0);
const NO_IDS: ReadonlySet<unknown> = new Set();

function sessionOf(request: IncomingMessage, transport: McpTransport): string | undefined {
  if (transport === 'streamable') {
    const id = presentedSessionId(request.rawHeaders);
    return id === undefined ? undefined : streamableBinding(id);
  }
  if (transport === 'messages') return legacyBinding(legacySessionIdOfQuery(parseRequestTarget(request.url ?? '').search));
  return undefined;
}

/** The literal paths of the MCP routes, with their transport and (first) route name. */
function mcpPathsOf(tables: Tables): Map<string, { transport: McpTransport; routeName: string }> {
  const paths = new Map<string, { transport: McpTransport; routeName: string }>();
  for (const route of tables.routes) {
    if (route.mcp === undefined) continue;
    if (route.rest || route.segments.some((segment) => segment.kind !== 'literal')) {
      throw new Error(`routes.yaml: MCP route "${route.name}" must have a literal path (got ${route.path})`);
    }
    const known = paths.get(route.path);
    if (known !== undefined && known.transport !== route.mcp) {
      throw new Error(`routes.yaml: ${route.path} cannot be both an ${known.transport} and an ${route.mcp} MCP route`);
    }
    if (known === undefined) paths.set(route.path, { transport: route.mcp, routeName: route.name });
  }
  return paths;
}

function hasBody(request: IncomingMessage): boolean {
  const { headers } = request;
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}
