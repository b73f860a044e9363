import type { McpTransport } from '../config/tables.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { RequestPipeline } from '../pipeline/request-pipeline.ts';
import { assertJsonBodyHeaders, parseJsonRpcBody } from './json-rpc-body.ts';
import { hasBody, type Exchange, type ExchangeReplies, type ExchangeStep } from './mcp-exchange.ts';

/** What each MCP transport serves; the route table may list fewer methods (then 405), never more. */
export const SERVED_METHODS: Record<McpTransport, readonly string[]> = {
  streamable: ['POST', 'GET', 'DELETE'],
  sse: ['GET'],
  messages: ['POST'],
};

const EMPTY = Buffer.alloc(0);

export interface RequestReadingOptions {
  readonly pipeline: Pick<RequestPipeline, 'decideMessages'>;
  readonly replies: ExchangeReplies;
  /** Largest JSON-RPC body read, in bytes (`BODY_LIMIT`). */
  readonly bodyLimit: number;
  /** Messages one JSON-RPC batch may hold (`MCP_MAX_BATCH`). */
  readonly maxBatch: number;
}

/**
 * Reads and decides an MCP request: its method for the transport, then (a POST) its body, up
 * to the limit, and every message in it, decided before any of them is forwarded. A request
 * refused here never reaches the session check, nor the upstream.
 */
export class RequestReading {
  readonly #options: RequestReadingOptions;

  constructor(options: RequestReadingOptions) {
    this.#options = options;
  }

  /** The method, then the body and every message in it: refused here, or on to `next` (the session check). */
  read(exchange: Exchange, next: ExchangeStep): void {
    const { request } = exchange;
    const { replies } = this.#options;
    const method = request.method!;
    const allowedMethods = SERVED_METHODS[exchange.transport];
    if (!allowedMethods.includes(method)) {
      replies.refuse(exchange, { code: 'method_not_allowed', detail: `This MCP path serves ${allowedMethods.join(', ')}`, allowedMethods });
      return;
    }
    if (method !== 'POST') {
      if (hasBody(request)) replies.refuse(exchange, { code: 'bad_request', detail: `A ${method} on an MCP path has no body` });
      else next(exchange);
      return;
    }
    assertJsonBodyHeaders(request);
    this.#readBody(exchange, (error, body) => {
      if (error !== undefined) replies.fail(exchange, error);
      else replies.guarded(exchange, () => this.#decideMessages(exchange, body, next));
    });
  }

  /** Every message of the body, decided before any of them is forwarded. */
  #decideMessages(exchange: Exchange, body: Buffer, next: ExchangeStep): void {
    exchange.body = parseJsonRpcBody(body, { maxBatch: this.#options.maxBatch });
    const decision = this.#options.pipeline.decideMessages(exchange.authorized, exchange.body.messages);
    if (decision.allow) next(exchange);
    else this.#options.replies.refuse(exchange, decision);
  }

  /**
   * The body, up to `BODY_LIMIT` bytes. Past the limit the request is answered at once and its
   * connection closed (lingering, as the generic forwarding does), so the rest is never held.
   */
  #readBody(exchange: Exchange, done: (error: GatewayError | undefined, body: Buffer) => void): void {
    const { request, response } = exchange;
    const { bodyLimit: limit, replies } = this.#options;
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
      replies.observe(exchange, false, 'bad_request');
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
      replies.observe(exchange, false, 'bad_request');
    };
    const stop = () => {
      request.off('data', onData).off('end', onEnd).off('close', onClose);
    };
    request.on('data', onData).on('end', onEnd).on('close', onClose);
  }
}
