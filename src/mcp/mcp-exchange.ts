import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { McpTransport } from '../config/tables.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { toGatewayError } from '../http/error-handler.ts';
import { GATEWAY_RATE_LIMIT_FIELDS } from '../http/rate-limit-headers.ts';
import { refusalFields, type RefusalFields } from '../http/refusal-log.ts';
import type { ApiKeyPrincipal } from '../policy/principal.ts';
import type { CompiledRoute } from '../policy/routes.ts';
import type { Authorized, ObservedDecision, RequestPipeline, Uncounted } from '../pipeline/request-pipeline.ts';
import type { JsonRpcBody } from './json-rpc-body.ts';
import { mcpRefusalResponse, mcpRequestRefusal, type McpRefusal, type McpRefusalResponse } from './json-rpc-error.ts';

/** One request on an MCP path, from the moment its key is known to be an API key. */
export interface Exchange {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
  readonly requestId: string;
  readonly route: CompiledRoute;
  readonly principal: ApiKeyPrincipal;
  readonly authorized: Authorized;
  readonly started: number;
  readonly transport: McpTransport;
  body?: JsonRpcBody;
  /** The binding key of the session the request presented (`streamable:…`, `legacy:…`). */
  session?: string;
  /** Allowed by every rule but its rate limits: counted once its session is checked. */
  uncounted?: Uncounted;
}

/** A step of an exchange, handed on to the next once it is done. */
export type ExchangeStep = (exchange: Exchange) => void;

/** The refusal line's fields of an exchange: its route and its key are known by now. */
function refusalFieldsOf(exchange: Exchange): RefusalFields {
  return refusalFields(exchange.request, { routeName: exchange.route.name, keyId: exchange.principal.keyId });
}

export function hasBody(request: IncomingMessage): boolean {
  const { headers } = request;
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
}

/**
 * How an exchange ends when the gateway answers it itself: a JSON-RPC error (a refusal, or a
 * failure), and the pipeline told of the decision once.
 */
export class ExchangeReplies {
  readonly #pipeline: Pick<RequestPipeline, 'observe'>;
  readonly #log: FastifyBaseLogger;

  constructor(pipeline: Pick<RequestPipeline, 'observe'>, log: FastifyBaseLogger) {
    this.#pipeline = pipeline;
    this.#log = log;
  }

  /** The final decision on the request: told exactly once per exchange. */
  observe(exchange: Exchange, allowed: boolean, code: ObservedDecision['code']): void {
    this.#pipeline.observe(exchange.request, exchange.route.name, { allowed, code }, exchange.started, 'api_key');
  }

  /**
   * Runs a step of the exchange: whatever it throws (a refusal raised as a GatewayError, a
   * bug) is answered as a JSON-RPC error, never left to crash the process from a callback.
   */
  guarded(exchange: Exchange, step: ExchangeStep): void {
    try {
      step(exchange);
    } catch (error) {
      this.fail(exchange, error);
    }
  }

  /** A refusal of the request's method, headers, body, messages or session: nothing was forwarded, and one line says why. */
  refuse(exchange: Exchange, refusal: McpRefusal): void {
    this.observe(exchange, false, refusal.code);
    const revision = exchange.request.headers['mcp-protocol-version'];
    const answer = mcpRefusalResponse(refusal, exchange.body?.messages, exchange.body?.batch, {
      revision: typeof revision === 'string' ? revision : undefined,
      answersOnStream: exchange.transport === 'messages',
    });
    this.#log.info({ reqId: exchange.requestId, code: refusal.code, status: answer.status, ...refusalFieldsOf(exchange) }, 'request refused');
    this.#send(exchange, answer);
  }

  /**
   * A refusal or failure before forwarding, raised as an error. A GatewayError (an unreadable
   * body, two session ids, the bindings' store down) is a refusal like the others, answering
   * the messages' ids when the body was parsed; anything else is a failure, logged.
   */
  fail(exchange: Exchange, error: unknown): void {
    if (error instanceof GatewayError) {
      this.refuse(exchange, { code: error.code, detail: error.message, scope: error.scope, allowedMethods: error.allow, retryAfter: error.retryAfter });
      return;
    }
    this.observe(exchange, false, toGatewayError(error as Error).code);
    this.failReply(exchange, error);
  }

  /** A failure (after forwarding began, or before it and not a refusal): any headers set are dropped, the JSON-RPC error is sent instead. */
  failReply(exchange: Exchange, error: unknown): void {
    const { response } = exchange;
    if (response.headersSent) {
      response.destroy();
      return;
    }
    const gatewayError = toGatewayError(error as Error);
    if (gatewayError.status >= 500) this.#log.error({ reqId: exchange.requestId, err: error }, 'MCP request failed');
    // Whatever the upstream's answer had set goes; the key's rate limits stay, as on every answer.
    for (const name of response.getHeaderNames()) if (!GATEWAY_RATE_LIMIT_FIELDS.has(name)) response.removeHeader(name);
    const answer = mcpRequestRefusal(gatewayError);
    if (gatewayError.status < 500) this.#log.info({ reqId: exchange.requestId, code: gatewayError.code, status: answer.status, ...refusalFieldsOf(exchange) }, 'request refused');
    this.#send(exchange, answer);
  }

  #send({ request, response, requestId }: Exchange, answer: McpRefusalResponse): void {
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
}
