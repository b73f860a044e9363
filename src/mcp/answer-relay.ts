import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { GatewayError } from '../errors/gateway-error.ts';
import { rateLimitFieldsSetOn } from '../http/rate-limit-headers.ts';
import type { Licence } from '../policy/decide.ts';
import type { ToolGrants } from '../policy/scopes.ts';
import type { OpenStreams } from '../proxy/open-streams.ts';
import type { TakeWhole, Upstream, UpstreamResponse, WholeAnswer } from '../proxy/upstream.ts';
import { forwardContextOf, upstreamHeaderRewriter, type IdentityHeaderValues } from '../proxy/upstream-headers.ts';
import { toolsListIdsOf } from './answer-inspection.ts';
import { streamEvents } from './event-stream-relay.ts';
import type { Exchange, ExchangeReplies } from './mcp-exchange.ts';
import { answerTypeOf } from './media-type.ts';
import type { SessionGate } from './session-gate.ts';
import type { ToolParamHeaders } from './tool-param-headers.ts';
import { hasNoBody, isIdentityEncoding, MCP_ANSWER_CACHE_CONTROL, sendCheckedAnswer, writeAnswerHead } from './upstream-answer.ts';

export interface AnswerRelayOptions {
  /** The one way to the upstream: only its `relay` is used. */
  readonly upstream: Pick<Upstream, 'relay'>;
  readonly forwardAuthorization: boolean;
  readonly identity: IdentityHeaderValues;
  readonly grants: ToolGrants;
  readonly licence: Licence;
  readonly streams: OpenStreams;
  readonly sessions: SessionGate;
  readonly replies: ExchangeReplies;
  readonly log: FastifyBaseLogger;
  /** Largest answer that is not an event stream held in memory to be inspected. */
  readonly maxFiltered: number;
  /** Learns the tools' mirrored parameters from the lists passed on. */
  readonly toolHeaders: ToolParamHeaders;
}

const NO_IDS: ReadonlySet<unknown> = new Set();

const CACHE_CONTROL: readonly string[] = ['cache-control', MCP_ANSWER_CACHE_CONTROL];

/** The gateway's own fields on an answer relayed as it comes: its Cache-Control, and a limited key's limits. */
function answerHeadersOf(response: Exchange['response']): readonly string[] {
  const limits = rateLimitFieldsSetOn(response);
  return limits === undefined ? CACHE_CONTROL : [...limits, ...CACHE_CONTROL];
}

/**
 * Sends an authorized, session-checked exchange upstream and answers the client from what
 * comes back: the session booked, tools lists filtered to the key's tools, any failure a
 * JSON-RPC error.
 */
export class AnswerRelay {
  readonly #options: AnswerRelayOptions;
  readonly #rewriteHeaders: ReturnType<typeof upstreamHeaderRewriter>;
  readonly #seen: (tools: readonly unknown[]) => void;

  constructor(options: AnswerRelayOptions) {
    this.#options = options;
    this.#seen = (tools) => options.toolHeaders.learn(tools);
    this.#rewriteHeaders = upstreamHeaderRewriter({
      forwardAuthorization: options.forwardAuthorization,
      alsoDrop: ['content-length', 'content-type', 'content-encoding', 'accept-encoding'],
    });
  }

  /**
   * Sends the authorized request upstream. An answer without a body that leaves the session's
   * binding alone is relayed as it comes; any other is taken over (`#takeOver`), as any body
   * may carry a tools list. An upstream failure is answered as a JSON-RPC error.
   */
  forward(exchange: Exchange): void {
    const { request, response, requestId, body } = exchange;
    const { replies, streams } = this.#options;
    // A GET opens the session's (or the legacy transport's) event stream: long-lived, so booked
    // against the key's cap (a refusal thrown here is answered by `guarded`) and sent on the
    // streams' own connections. The key was checked asynchronously since `started`.
    const stream = request.method === 'GET';
    if (stream) {
      const release = streams.open(exchange.principal, () => response.destroy(), exchange.started);
      if (release === undefined) {
        // Cut at once: its key was evicted (or expired) while the request was decided.
        replies.observe(exchange, true, undefined);
        return;
      }
      response.once('close', release);
    }
    this.#options.upstream.relay(
      response,
      requestId,
      {
        method: request.method!,
        path: request.url!,
        headers: this.#upstreamHeaders(exchange),
        body: body === undefined ? null : body.serialized,
        route: exchange.route.name,
        stream,
        // An answer relayed as it comes keeps the key's limits set when it was decided, and the gateway's
        // Cache-Control, whatever the upstream says of its own; its cache fields for CDNs are dropped.
        answerHeaders: answerHeadersOf(response),
        privateAnswer: true,
      },
      (error) => replies.failReply(exchange, error),
      (statusCode, headers) => this.#takeOver(exchange, statusCode, headers),
    );
    replies.observe(exchange, true, undefined);
  }

  #upstreamHeaders(exchange: Exchange): string[] {
    const { request } = exchange;
    const headers = this.#rewriteHeaders(request.headers, forwardContextOf(request, this.#options.identity.of(exchange.principal), exchange.requestId));
    // The body sent is the re-serialised one (undici sets its length): nothing of how the client framed or encoded its own.
    if (exchange.body !== undefined) headers.push('content-type', 'application/json');
    // Responses are inspected (tools/list, the legacy endpoint event): they must arrive readable.
    headers.push('accept-encoding', 'identity');
    return headers;
  }

  /** The `Inspect` of the relay: which answers are passed on as they come, and how the others are taken over. */
  #takeOver(exchange: Exchange, statusCode: number, headers: IncomingHttpHeaders): ((answer: UpstreamResponse) => void) | TakeWhole | undefined {
    const { replies, sessions } = this.#options;
    if (!sessions.changes(exchange, statusCode, headers) && hasNoBody(statusCode, headers)) return undefined;
    // An event stream is filtered as it comes; anything else is read whole (no stream between) and checked.
    if (answerTypeOf(headers['content-type']) === 'event-stream') {
      return (answer) => {
        this.#respondStream(exchange, answer).catch((error: unknown) => {
          answer.body.destroy();
          replies.failReply(exchange, error);
        });
      };
    }
    return {
      maxBytes: this.#options.maxFiltered,
      whole: (answer) => {
        if (answer instanceof GatewayError) {
          replies.failReply(exchange, answer);
          return;
        }
        try {
          this.#respondWhole(exchange, answer);
        } catch (error) {
          replies.failReply(exchange, error);
        }
      },
    };
  }

  /** An event stream: the session booked, then its events filtered as they come. */
  async #respondStream(exchange: Exchange, answer: UpstreamResponse): Promise<void> {
    const { statusCode, headers } = answer;
    const { response, requestId } = exchange;
    const { sessions, streams, grants, licence, log } = this.#options;
    await sessions.book(exchange, statusCode, headers);
    if (!isIdentityEncoding(headers['content-encoding'])) {
      throw new GatewayError('upstream_unavailable', 'The upstream sent an encoded event stream the gateway cannot inspect');
    }
    if (exchange.request.method !== 'GET') {
      // A POST answered with a stream: cut with the key's other streams, but not counted, as a
      // client may have many requests answered at once (the GET that opened a stream was booked).
      const release = streams.open(exchange.principal, () => response.destroy(), undefined, false);
      if (release !== undefined) response.once('close', release);
    }
    writeAnswerHead(response, statusCode, headers, requestId);
    response.removeHeader('content-length');
    const allowed = grants.allowedTools(exchange.principal, licence);
    streamEvents(exchange, answer, { allowed, bind: () => sessions.streamBinding(exchange), log, seen: this.#seen });
  }

  /** Any other answer, read whole: the session booked (only when it changes: no promise otherwise), then checked and sent. */
  #respondWhole(exchange: Exchange, answer: WholeAnswer): void {
    const { sessions, grants, licence, replies } = this.#options;
    const send = () => {
      const toolsListIds = exchange.body === undefined ? NO_IDS : toolsListIdsOf(exchange.body.messages);
      const allowed = grants.allowedTools(exchange.principal, licence);
      sendCheckedAnswer(exchange.response, exchange.requestId, answer, { rules: { allowed, toolsListIds, seen: this.#seen }, acknowledgements: exchange.transport === 'messages' });
    };
    if (!sessions.changes(exchange, answer.statusCode, answer.headers)) {
      send();
      return;
    }
    sessions.book(exchange, answer.statusCode, answer.headers).then(send).catch((error: unknown) => replies.failReply(exchange, error));
  }
}
