import type { McpTransport } from '../config/tables.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { setRateLimitHeaders } from '../http/rate-limit-headers.ts';
import type { RequestPipeline, Settled, Uncounted } from '../pipeline/request-pipeline.ts';
import { assertJsonBodyHeaders, parseJsonRpcBody } from './json-rpc-body.ts';
import { hasBody, type Exchange, type ExchangeReplies, type ExchangeStep } from './mcp-exchange.ts';
import type { ToolParamHeaders } from './tool-param-headers.ts';

/** What each MCP transport serves; the route table may list fewer methods (then 405), never more. */
export const SERVED_METHODS: Record<McpTransport, readonly string[]> = {
  streamable: ['POST', 'GET', 'DELETE'],
  sse: ['GET'],
  messages: ['POST'],
};

const EMPTY = Buffer.alloc(0);

export interface RequestReadingOptions {
  readonly pipeline: Pick<RequestPipeline, 'decideExchange' | 'countExchange'>;
  readonly replies: ExchangeReplies;
  /** Largest JSON-RPC body read, in bytes (`BODY_LIMIT`). */
  readonly bodyLimit: number;
  /** Messages one JSON-RPC batch may hold (`MCP_MAX_BATCH`). */
  readonly maxBatch: number;
  /** The tools' mirrored parameters: one another replica learnt is fetched before a call with `Mcp-Param-*` is decided. */
  readonly toolHeaders?: Pick<ToolParamHeaders, 'mayRecall' | 'recall'> | undefined;
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
    const { replies, pipeline } = this.#options;
    const method = request.method!;
    const allowedMethods = SERVED_METHODS[exchange.transport];
    if (!allowedMethods.includes(method)) {
      replies.refuse(exchange, { code: 'method_not_allowed', detail: `This MCP path serves ${allowedMethods.join(', ')}`, allowedMethods });
      return;
    }
    if (method !== 'POST') {
      if (hasBody(request)) {
        replies.refuse(exchange, { code: 'bad_request', detail: `A ${method} on an MCP path has no body` });
        return;
      }
      // The headers' own rules (the protocol version): a GET or DELETE carries no message.
      this.#settle(exchange, pipeline.decideExchange(exchange.authorized, request), next);
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
    const tool = this.#toolToRecall(exchange);
    if (tool === undefined) {
      this.#decide(exchange, next);
      return;
    }
    void this.#options.toolHeaders!.recall(tool).then(() => this.#options.replies.guarded(exchange, () => this.#decide(exchange, next)));
  }

  /**
   * A `tools/call` with `Mcp-Param-*` headers of a tool this replica has not seen listed: its
   * schema may be known to another replica (the client listed the tools through it).
   */
  #toolToRecall({ body, authorized }: Exchange): string | undefined {
    const headers = this.#options.toolHeaders;
    if (headers === undefined || body === undefined || body.batch || body.messages.length !== 1) return undefined;
    // Read once by the pipeline when the credential was decided.
    if (authorized.mcpHeaders === undefined || authorized.mcpHeaders.params.size === 0) return undefined;
    const { method, params } = body.messages[0] as { method?: unknown; params?: { name?: unknown } };
    if (method !== 'tools/call' || typeof params?.name !== 'string' || !headers.mayRecall(params.name)) return undefined;
    return params.name;
  }

  #decide(exchange: Exchange, next: ExchangeStep): void {
    const { messages, batch } = exchange.body!;
    this.#settle(exchange, this.#options.pipeline.decideExchange(exchange.authorized, exchange.request, messages, batch), next);
  }

  /**
   * The rate limits of an exchange every other rule allowed, counted once its session is known
   * to be its key's (the step after the session check): a request refused for its session
   * counts nothing. On to `next`, or refused; the answer carries the limits it was counted against.
   */
  count(exchange: Exchange, next: ExchangeStep): void {
    const uncounted = exchange.uncounted;
    if (uncounted === undefined) next(exchange);
    else this.#settle(exchange, this.#options.pipeline.countExchange(uncounted), next);
  }

  /** The exchange's decision (a promise when a shared rate limit had to be asked): on to `next`, or refused. */
  #settle(exchange: Exchange, settled: Settled | Uncounted | Promise<Settled>, next: ExchangeStep): void {
    const { replies } = this.#options;
    const go = (decision: Settled | Uncounted) => {
      if (decision.allow === 'count') {
        // Allowed by every rule but the limits, counted after the session check (`count`).
        exchange.uncounted = decision;
        next(exchange);
        return;
      }
      setRateLimitHeaders(exchange.response, decision.quotas);
      if (decision.allow) next(exchange);
      else replies.refuse(exchange, decision);
    };
    if (settled instanceof Promise) settled.then((decision) => replies.guarded(exchange, () => go(decision)), (error: unknown) => replies.fail(exchange, error));
    else go(settled);
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
