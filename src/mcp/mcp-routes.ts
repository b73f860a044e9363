import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { pipeline, type Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { McpTransport, Tables } from '../config/tables.ts';
import { extractBearer } from '../credentials/bearer.ts';
import { errorHandler, toGatewayError } from '../http/error-handler.ts';
import { GatewayError } from '../http/errors.ts';
import { decide, type Licence } from '../policy/decide.ts';
import type { ApiKeyPrincipal } from '../policy/principal.ts';
import type { CompiledRoute } from '../policy/routes.ts';
import { allowedTools } from '../policy/scopes.ts';
import type { Authorization, Authorized, ObservedDecision } from '../proxy/authorize.ts';
import { parseRequestTarget } from '../proxy/request-target.ts';
import type { Upstream, UpstreamResponse } from '../proxy/upstream.ts';
import { identityHeadersOf, isEndToEndResponseHeader, upstreamHeaderRewriter } from '../proxy/upstream-headers.ts';
import { assertJsonBodyHeaders, parseJsonRpcBody, type JsonRpcBody } from './json-rpc-body.ts';
import { mcpRefusalResponse, mcpRequestRefusal, type McpRefusal } from './json-rpc-error.ts';
import type { SessionBindings } from './session-bindings.ts';
import { isSessionId, legacyBinding, legacySessionIdOfEndpoint, legacySessionIdOfQuery, presentedSessionId, streamableBinding } from './session-ids.ts';
import { createSseFilter } from './sse-filter.ts';
import { filterToolsListJson } from './tools-list-filter.ts';

export interface McpOptions {
  /** The one way to the upstream, shared with the generic forwarding. */
  upstream: Upstream;
  forwardAuthorization: boolean;
  /** Largest JSON-RPC body read, in bytes (`BODY_LIMIT`). */
  bodyLimit: number;
  tables: Tables;
  licence: Licence;
  now: () => Date;
  /** Credential and route check, before any body is read (`createAuthorizer`, without its own `observe`). */
  authorize: (request: IncomingMessage) => Authorization;
  bindings: SessionBindings;
  /** Told once per request of the final decision, message inspection included. */
  observe?: (decision: ObservedDecision) => void;
  /** Largest `application/json` answer to a `tools/list` held in memory to be filtered. Default 16 MiB. */
  maxFilteredResponseBytes?: number;
  /** While a session's stream is open its binding is extended this often. Default 15 minutes. */
  streamBindingRefreshMs?: number;
}

/** What each MCP transport serves; the route table may list fewer methods (then 405), never more. */
const SERVED_METHODS: Record<McpTransport, readonly string[]> = {
  streamable: ['POST', 'GET', 'DELETE'],
  sse: ['GET'],
  messages: ['POST'],
};

const DEFAULT_MAX_FILTERED_RESPONSE_BYTES = 16 * 1024 * 1024;
const DEFAULT_STREAM_BINDING_REFRESH_MS = 15 * 60_000;

interface Exchange {
  route: CompiledRoute;
  principal: ApiKeyPrincipal;
  started: number;
  transport: McpTransport;
  body?: JsonRpcBody;
  /** The binding key of the session the request presented (`streamable:…`, `legacy:…`). */
  session?: string;
  forwarded?: boolean;
}

/**
 * Serves the MCP routes of the route table (`mcp: streamable | sse | messages`): the key is
 * checked before any body is read, every posted JSON-RPC message is decided before anything
 * reaches the tool server, the upstream receives the authorized messages re-serialised,
 * sessions are bound to the key that opened them, and `tools/list` results are filtered
 * (interface.md, "MCP tools and scopes"). Registered as exact paths, so the generic proxy's
 * catch-all never sees an MCP path.
 */
export async function registerMcp(app: FastifyInstance, options: McpOptions): Promise<void> {
  const paths = mcpPathsOf(options.tables);
  if (paths.size === 0) return;
  const exchanges = new WeakMap<FastifyRequest, Exchange>();
  const maxFiltered = options.maxFilteredResponseBytes ?? DEFAULT_MAX_FILTERED_RESPONSE_BYTES;
  const refreshMs = options.streamBindingRefreshMs ?? DEFAULT_STREAM_BINDING_REFRESH_MS;
  const rewriteHeaders = upstreamHeaderRewriter({
    forwardAuthorization: options.forwardAuthorization,
    alsoDrop: ['content-length', 'content-type', 'content-encoding', 'accept-encoding'],
  });

  const observeDecision = (exchange: Exchange, allowed: boolean, code: ObservedDecision['code']) =>
    options.observe?.({ allowed, code, credential: 'api_key', route: exchange.route.name, seconds: (performance.now() - exchange.started) / 1000 });

  await app.register(async (scope) => {
    // The body is read as bytes and parsed strictly here, never by a lenient parser first.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: options.bodyLimit }, (_request, body, done) => done(null, body));

    // Past the credential check, every refusal on an MCP path is a JSON-RPC error (a body over the limit, say).
    scope.setErrorHandler((error: Error, request, reply) => {
      const exchange = exchanges.get(request);
      if (exchange === undefined || exchange.forwarded === true) return errorHandler(error, request, reply);
      const gatewayError = toGatewayError(error);
      if (gatewayError.status >= 500) request.log.error({ err: error }, 'MCP request failed');
      observeDecision(exchange, false, gatewayError.code);
      const response = mcpRequestRefusal(gatewayError);
      return reply.code(response.status).headers(response.headers).send(response.body);
    });

    for (const [path, { transport, routeName }] of paths) {
      scope.route({
        method: scope.supportedMethods,
        // A literal `:` would start a parameter in fastify's route syntax; `::` is the colon itself.
        url: path.replaceAll(':', '::'),
        exposeHeadRoute: false,
        // A callback hook, as in the generic forwarding: a cached key is decided without a promise.
        onRequest: (request, _reply, done) => {
          const started = performance.now();
          const refuse = (error: unknown) => {
            const bearer = extractBearer(request.headers.authorization).kind;
            options.observe?.({
              allowed: false,
              code: error instanceof GatewayError ? error.code : 'internal_error',
              credential: bearer === 'api_key' ? 'api_key' : bearer === 'jwt' ? 'admin' : 'none',
              route: routeName,
              seconds: (performance.now() - started) / 1000,
            });
            done(error as Error);
          };
          const admit = ({ route, principal }: Authorized) => {
            if (principal?.kind !== 'api_key') {
              refuse(new GatewayError('wrong_credential_type', 'The MCP server needs an API key'));
              return;
            }
            exchanges.set(request, { route, principal, started, transport });
            done();
          };
          let authorization: Authorization;
          try {
            authorization = options.authorize(request.raw);
          } catch (error) {
            refuse(error);
            return;
          }
          if (authorization instanceof Promise) authorization.then(admit, refuse);
          else admit(authorization);
        },
        // Answers later, by itself: refused here, or relayed (forward) once the upstream answers.
        handler: (request, reply) => {
          const exchange = exchanges.get(request)!;
          inspect(request, exchange).then(
            (refusal) => {
              if (refusal === undefined) {
                observeDecision(exchange, true, undefined);
                forward(request, reply, exchange);
                return;
              }
              observeDecision(exchange, false, refusal.code);
              const response = mcpRefusalResponse(refusal, exchange.body?.messages, exchange.body?.batch);
              reply.code(response.status).headers(response.headers).send(response.body);
            },
            (error: unknown) => reply.send(error),
          );
        },
      });
    }
  });

  /** Everything decided before forwarding: the method, the body and every message in it, the session. */
  async function inspect(request: FastifyRequest, exchange: Exchange): Promise<McpRefusal | undefined> {
    const method = request.raw.method ?? 'GET';
    try {
      if (!SERVED_METHODS[exchange.transport].includes(method)) {
        const allowedMethods = SERVED_METHODS[exchange.transport];
        return { code: 'method_not_allowed', detail: `This MCP path serves ${allowedMethods.join(', ')}`, allowedMethods };
      }
      if (method === 'POST') {
        assertJsonBodyHeaders(request.raw);
        exchange.body = parseJsonRpcBody(request.body as Buffer | undefined);
        const decision = decide(
          { route: exchange.route, params: {}, principal: exchange.principal, licence: options.licence, now: options.now(), mcpMessages: exchange.body.messages },
          options.tables,
        );
        if (!decision.allow) return decision;
      } else if (hasBody(request)) {
        return { code: 'bad_request', detail: `A ${method} on an MCP path has no body` };
      }
      const sessionId = sessionOf(request, exchange.transport);
      if (sessionId === undefined) return undefined;
      exchange.session = sessionId;
      const owner = await options.bindings.check(sessionId, exchange.principal.keyId);
      if (owner === 'other_key') return { code: 'session_mismatch', detail: 'This MCP session was opened with another API key' };
      if (owner === 'unknown') {
        return { code: 'not_found', detail: 'No such MCP session (it ended, expired or was not opened through this gateway): initialize a new one' };
      }
      return undefined;
    } catch (error) {
      if (error instanceof GatewayError) return { code: error.code, detail: error.message, scope: error.scope };
      throw error;
    }
  }

  /**
   * Sends the authorized request upstream. An answer that needs nothing of the gateway is
   * relayed as it comes; one that changes a session's binding, or may carry a tools list, is
   * taken over by `respond`. An upstream failure is answered as a JSON-RPC error.
   */
  function forward(request: FastifyRequest, reply: FastifyReply, exchange: Exchange): void {
    exchange.forwarded = true;
    const body = exchange.body;
    options.upstream.relay(
      reply.raw,
      request.id,
      {
        method: request.raw.method!,
        path: request.raw.url!,
        headers: upstreamHeaders(request, exchange),
        body: body === undefined ? null : body.serialized,
        route: exchange.route.name,
      },
      (error) => {
        exchange.forwarded = false;
        failReply(reply, error);
      },
      (statusCode, headers) => {
        if (!changesSession(exchange, request.raw.method, statusCode, headers) && !isInspected(exchange, headers)) return undefined;
        return (upstream) => {
          respond(reply, exchange, upstream).catch((error: unknown) => {
            upstream.body.destroy();
            failReply(reply, error);
          });
        };
      },
      reply,
    );
  }

  function upstreamHeaders(request: FastifyRequest, exchange: Exchange): string[] {
    const headers = rewriteHeaders(request.headers, {
      identity: identityHeadersOf(exchange.principal),
      clientAddress: request.ip,
      protocol: request.protocol,
      host: request.headers.host,
      requestId: request.id,
    });
    // The body sent is the re-serialised one (undici sets its length): nothing of how the client framed or encoded its own.
    if (exchange.body !== undefined) headers.push('content-type', 'application/json');
    // Responses are inspected (tools/list, the legacy endpoint event): they must arrive readable.
    headers.push('accept-encoding', 'identity');
    return headers;
  }

  /** Whether the answer opens or ends the session's binding (Streamable HTTP). */
  function changesSession(exchange: Exchange, method: string | undefined, statusCode: number, headers: IncomingHttpHeaders): boolean {
    if (exchange.transport !== 'streamable') return false;
    if (exchange.session === undefined) return statusCode < 300 && headers['mcp-session-id'] !== undefined;
    return statusCode === 404 || (method === 'DELETE' && statusCode < 300);
  }

  /** Whether the answer must be read: an event stream (tools lists, the legacy endpoint event), or JSON answering tools/list. */
  function isInspected(exchange: Exchange, headers: IncomingHttpHeaders): boolean {
    const type = mediaTypeOf(headers['content-type']);
    return type === 'text/event-stream' || (type === 'application/json' && exchange.body !== undefined && requestsToolsList(exchange.body));
  }

  /** Session bookkeeping, then the body: filtered when it may carry a tools list, streamed as it comes otherwise. */
  async function respond(reply: FastifyReply, exchange: Exchange, upstream: UpstreamResponse): Promise<void> {
    const { statusCode, headers } = upstream;
    const method = reply.request.raw.method;
    reply.code(statusCode);
    for (const name in headers) {
      if (isEndToEndResponseHeader(name, headers.connection)) reply.header(name, headers[name]);
    }
    if (exchange.transport === 'streamable') {
      const issued = headerValue(headers['mcp-session-id']);
      if (exchange.session === undefined && headers['mcp-session-id'] !== undefined && statusCode < 300) {
        if (issued === undefined || !isSessionId(issued) || !(await options.bindings.bind(streamableBinding(issued), exchange.principal.keyId))) {
          throw new GatewayError('upstream_unavailable', 'The upstream issued an MCP session id that cannot be bound');
        }
      } else if (exchange.session !== undefined && (statusCode === 404 || (method === 'DELETE' && statusCode < 300))) {
        await options.bindings.unbind(exchange.session);
      }
    }
    const allowed = allowedTools(exchange.principal, options.licence, options.tables);
    const type = mediaTypeOf(headers['content-type']);
    const encoded = !isIdentityEncoding(headers['content-encoding']);

    if (type === 'text/event-stream') {
      if (encoded) throw new GatewayError('upstream_unavailable', 'The upstream sent an encoded event stream the gateway cannot inspect');
      streamEvents(reply, exchange, upstream, allowed);
      return;
    }
    if (type === 'application/json' && exchange.body !== undefined && requestsToolsList(exchange.body)) {
      if (encoded) throw new GatewayError('upstream_unavailable', 'The upstream sent an encoded answer to tools/list the gateway cannot inspect');
      const filtered = filterToolsListJson(await readText(upstream.body, maxFiltered), allowed);
      if (filtered === undefined) throw new GatewayError('upstream_unavailable', 'The upstream answered tools/list with invalid JSON');
      reply.removeHeader('content-length');
      reply.removeHeader('transfer-encoding');
      reply.send(filtered);
      return;
    }
    reply.send(upstream.body);
  }

  function streamEvents(reply: FastifyReply, exchange: Exchange, upstream: UpstreamResponse, allowed: ReadonlySet<string>): void {
    const keyId = exchange.principal.keyId;
    let legacySession: string | undefined;
    const filter = createSseFilter({
      allowed,
      ...(exchange.transport === 'sse'
        ? {
            onEndpoint: async (data: string) => {
              const id = legacySessionIdOfEndpoint(data);
              if (id === undefined || legacySession !== undefined) throw new Error('The upstream sent an endpoint event naming no single session');
              if (!(await options.bindings.bind(legacyBinding(id), keyId))) throw new Error('The legacy session is bound to another key');
              legacySession = legacyBinding(id);
            },
          }
        : {}),
    });
    // While the stream is open its session is in use: keep the binding from expiring.
    const refresh = setInterval(() => {
      const session = legacySession ?? exchange.session;
      if (session !== undefined) options.bindings.check(session, keyId).catch(() => {});
    }, refreshMs);
    refresh.unref();
    pipeline(upstream.body, filter, () => {
      clearInterval(refresh);
      // The legacy session ends with its stream.
      if (legacySession !== undefined) options.bindings.unbind(legacySession).catch(() => {});
    });
    reply.removeHeader('content-length');
    reply.send(filter);
  }

  function sessionOf(request: FastifyRequest, transport: McpTransport): string | undefined {
    if (transport === 'streamable') {
      const id = presentedSessionId(request.raw.rawHeaders);
      return id === undefined ? undefined : streamableBinding(id);
    }
    if (transport === 'messages') return legacyBinding(legacySessionIdOfQuery(parseRequestTarget(request.raw.url ?? '').search));
    return undefined;
  }

  /** A refusal after forwarding began: the upstream's headers are dropped, the JSON-RPC error is sent instead. */
  function failReply(reply: FastifyReply, error: unknown): void {
    if (reply.sent) {
      reply.raw.destroy();
      return;
    }
    const gatewayError = error instanceof GatewayError ? error : new GatewayError('internal_error', 'Internal error', { cause: error });
    if (gatewayError.status >= 500) reply.log.error({ err: error }, 'MCP request failed');
    for (const name of Object.keys(reply.getHeaders())) {
      if (name !== 'x-request-id') reply.removeHeader(name);
    }
    const response = mcpRequestRefusal(gatewayError);
    reply.code(response.status).headers(response.headers).send(response.body);
  }
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

function requestsToolsList(body: JsonRpcBody): boolean {
  return body.messages.some((message) => (message as { method?: unknown }).method === 'tools/list');
}

function hasBody(request: FastifyRequest): boolean {
  const { headers } = request.raw;
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}

function mediaTypeOf(value: string | string[] | undefined): string | undefined {
  const text = headerValue(value);
  return text?.split(';', 1)[0]!.trim().toLowerCase();
}

function isIdentityEncoding(value: string | string[] | undefined): boolean {
  const text = headerValue(value);
  return text === undefined || text.trim().toLowerCase() === 'identity' || text.trim() === '';
}

async function readText(stream: Readable, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      stream.destroy();
      throw new GatewayError('upstream_unavailable', `The upstream's answer to tools/list is larger than ${limit} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
