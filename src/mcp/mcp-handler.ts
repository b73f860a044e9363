import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { DEFAULTS } from '../config/env.ts';
import type { McpTransport, Tables } from '../config/tables.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { sendError } from '../http/error-handler.ts';
import { setRateLimitHeaders } from '../http/rate-limit-headers.ts';
import type { Licence } from '../policy/decide.ts';
import { deny, errorOf, type Deny } from '../policy/denial.ts';
import type { ApiKeyPrincipal } from '../policy/principal.ts';
import type { ToolGrants } from '../policy/scopes.ts';
import type { RequestPipeline, Verdict } from '../pipeline/request-pipeline.ts';
import type { OpenStreams } from '../proxy/open-streams.ts';
import type { Upstream } from '../proxy/upstream.ts';
import type { IdentityHeaderValues } from '../proxy/upstream-headers.ts';
import { AnswerRelay } from './answer-relay.ts';
import { ExchangeReplies, type Exchange, type ExchangeStep } from './mcp-exchange.ts';
import { RequestReading } from './request-reading.ts';
import type { SessionBindings } from './session-bindings.ts';
import { SessionGate } from './session-gate.ts';
import type { ToolParamHeaders } from './tool-param-headers.ts';

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
  /** The one pipeline: the credential and route before any body is read, then the messages. */
  pipeline: RequestPipeline;
  /** The tools each key may call, for filtering `tools/list` answers. */
  grants: ToolGrants;
  /** Learns the tools' mirrored parameters (`Mcp-Param-*`) from the lists relayed, for the pipeline to check calls against. */
  toolHeaders: ToolParamHeaders;
  identity: IdentityHeaderValues;
  bindings: SessionBindings;
  /** Failures logged with the request id (fastify's logger). */
  log: FastifyBaseLogger;
  /** A GET's event stream is booked here against its key's cap, and cut when the key ends. */
  streams: OpenStreams;
  /** Largest answer that is not an event stream held in memory to be inspected; a larger one is a 502. Default 16 MiB. */
  maxFilteredResponseBytes?: number;
  /** While a session's stream is open its binding is extended this often. Default 15 minutes. */
  streamBindingRefreshMs?: number;
}

export interface McpHandler {
  /** The MCP paths of the route table. */
  readonly paths: ReadonlySet<string>;
  /** Whether `path` (the request target's path, checked) is an MCP path. */
  serves(path: string): boolean;
  serve(request: IncomingMessage, response: ServerResponse, requestId: string, path: string): void;
  /** An upgrade on an MCP path: refused, as MCP's transports are plain HTTP. */
  upgradeRefusal(): Deny;
}

const DEFAULT_MAX_FILTERED_RESPONSE_BYTES = 16 * 1024 * 1024;
const DEFAULT_STREAM_BINDING_REFRESH_MS = 15 * 60_000;

/**
 * Serves the MCP routes of the route table (`mcp: streamable | sse | messages`) from the
 * one door (src/door/request-door.ts), decided by the one pipeline: the key is
 * checked before any body is read, every posted JSON-RPC message is decided before anything
 * reaches the tool server, the upstream receives the authorized messages re-serialised,
 * sessions are bound to the key that opened them, and `tools/list` results are filtered
 * (docs/mcp.md). Past the credential check every refusal is a
 * JSON-RPC error.
 *
 * Each step has a module of its own: reading and deciding the request (request-reading.ts),
 * the session check and booking (session-gate.ts), counting its rate limits (request-reading.ts), relaying and filtering the answer
 * (answer-relay.ts, event-stream-relay.ts), the JSON-RPC replies (mcp-exchange.ts).
 */
export function createMcpHandler(options: McpOptions): McpHandler {
  const paths = mcpPathsOf(options.tables);
  const { pipeline, log } = options;
  const replies = new ExchangeReplies(pipeline, log);
  const sessions = new SessionGate(options.bindings, replies, options.streamBindingRefreshMs ?? DEFAULT_STREAM_BINDING_REFRESH_MS);
  const relay = new AnswerRelay({
    upstream: options.upstream,
    forwardAuthorization: options.forwardAuthorization,
    identity: options.identity,
    grants: options.grants,
    toolHeaders: options.toolHeaders,
    licence: options.licence,
    streams: options.streams,
    sessions,
    replies,
    log,
    maxFiltered: options.maxFilteredResponseBytes ?? DEFAULT_MAX_FILTERED_RESPONSE_BYTES,
  });
  const reading = new RequestReading({
    pipeline,
    replies,
    bodyLimit: options.bodyLimit,
    maxBatch: options.maxBatch ?? DEFAULTS.MCP_MAX_BATCH,
    toolHeaders: options.toolHeaders,
  });
  const forward: ExchangeStep = (exchange) => relay.forward(exchange);
  // The rate limits last: a request refused for its session is not counted.
  const count: ExchangeStep = (exchange) => reading.count(exchange, forward);
  const checkSession: ExchangeStep = (exchange) => sessions.check(exchange, count);
  const read: ExchangeStep = (exchange) => reading.read(exchange, checkSession);
  const door: McpDoor = { pipeline, log, replies, read };
  return {
    paths: new Set(paths.keys()),
    serves: (path) => paths.has(path),
    serve: (request, response, requestId, path) => {
      const { transport, routeName } = paths.get(path)!;
      serve(door, { request, response, requestId, transport }, path, routeName);
    },
    upgradeRefusal: () => deny('bad_request', 'MCP paths take no upgrade: MCP runs over plain HTTP requests'),
  };
}

/** What a request on an MCP path meets before its key is known to be one that may use MCP. */
interface McpDoor {
  readonly pipeline: RequestPipeline;
  readonly log: FastifyBaseLogger;
  readonly replies: ExchangeReplies;
  /** The first step of an admitted exchange. */
  readonly read: ExchangeStep;
}

type Arrival = Pick<Exchange, 'request' | 'response' | 'requestId' | 'transport'>;

/** The credential and route, decided before any body is read; an admitted request goes on as an exchange. */
function serve({ pipeline, log, replies, read }: McpDoor, arrival: Arrival, path: string, routeName: string): void {
  const { request, response, requestId } = arrival;
  const started = performance.now();
  // Refused before the key is known to be one that may use MCP at all: problem+json, as on every path.
  const refuseCredential = (error: unknown, keyId?: number) => {
    pipeline.observe(request, routeName, { allowed: false, code: error instanceof GatewayError ? error.code : 'internal_error' }, started);
    sendError(response, error, requestId, log, { routeName, keyId });
  };
  const admit = (verdict: Verdict) => {
    // A limited key's answer tells its limits whatever it turns out to be; the exchange sets them again once counted.
    setRateLimitHeaders(response, verdict.quotas);
    if (!verdict.allow) {
      refuseCredential(errorOf(verdict), verdict.keyId);
      return;
    }
    // The route table allows only API keys on MCP routes (config/tables.ts): decide() has refused any other credential.
    const exchange: Exchange = { ...arrival, route: verdict.route, principal: verdict.principal as ApiKeyPrincipal, authorized: verdict, started };
    replies.guarded(exchange, read);
  };
  let authorization: ReturnType<RequestPipeline['authorize']>;
  try {
    authorization = pipeline.authorize(request, path, false);
  } catch (error) {
    refuseCredential(error);
    return;
  }
  // A cached key is decided without a promise.
  if (authorization instanceof Promise) authorization.then(admit, refuseCredential);
  else admit(authorization);
}

/** The literal paths of the MCP routes, with their transport and (first) route name, the metrics label of a refusal before the route is known. */
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
