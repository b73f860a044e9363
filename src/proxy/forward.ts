import type { IncomingMessage, ServerResponse } from 'node:http';
import { Transform } from 'node:stream';
import { GatewayError } from '../errors/gateway-error.ts';
import { rateLimitFields } from '../http/rate-limit-headers.ts';
import type { Authorized } from '../pipeline/request-pipeline.ts';
import type { OpenStreams, ReleaseStream } from './open-streams.ts';
import type { Refuse, Upstream } from './upstream.ts';
import { forwardContextOf, upstreamHeaderRewriter, type IdentityHeaderValues } from './upstream-headers.ts';

export interface ForwarderOptions {
  upstream: Upstream;
  forwardAuthorization: boolean;
  /** Largest body forwarded, in bytes (`BODY_LIMIT`). */
  bodyLimit: number;
  /** Where streams and tunnels are booked against their credential's cap, and cut when it ends. */
  streams: OpenStreams;
  identity: IdentityHeaderValues;
}

/**
 * The rewrite and the relay of an allowed request (docs/architecture.md, "One pipeline"): builds
 * what the upstream receives (the client's end-to-end headers, the gateway's forwarding and
 * identity headers, the body as it comes) and sends it, relaying the answer; a WebSocket
 * upgrade (`head`) is tunnelled. Decides nothing: the request was allowed by the pipeline.
 */
export class Forwarder {
  readonly #upstream: Upstream;
  readonly #bodyLimit: number;
  readonly #streams: OpenStreams;
  readonly #identity: IdentityHeaderValues;
  readonly #headers: ReturnType<typeof upstreamHeaderRewriter>;

  constructor(options: ForwarderOptions) {
    this.#upstream = options.upstream;
    this.#bodyLimit = options.bodyLimit;
    this.#streams = options.streams;
    this.#identity = options.identity;
    this.#headers = upstreamHeaderRewriter({ forwardAuthorization: options.forwardAuthorization });
  }

  /**
   * `head`: a WebSocket upgrade (the door has checked it is one), tunnelled. `fail` answers what
   * went wrong before the upstream's answer began (it was not a refusal).
   * `authorizedSince` (`performance.now()` from when an asynchronous credential check began): a
   * stream opened on it is cut if its key was evicted meanwhile.
   */
  forward(request: IncomingMessage, response: ServerResponse, requestId: string, authorized: Authorized, fail: Refuse, head?: Buffer, authorizedSince?: number): void {
    const { route, principal } = authorized;
    // MCP routes have literal paths, all served by the MCP handler, so none can match here; if the
    // tables ever let one, its messages would go uninspected: fail loudly instead.
    if (route.mcp !== undefined) {
      fail(new GatewayError('internal_error', 'An MCP route reached the generic forwarder'));
      return;
    }
    const stream = head !== undefined || isEventStreamRequest(request);
    if (stream && !this.#bookStream(request, response, authorized, fail, head, authorizedSince)) return;
    const headers = this.#headers(request.headers, forwardContextOf(request, this.#identity.of(principal), requestId));
    // A limited key's answer carries its limits, whatever the upstream says of its own.
    const answerHeaders = authorized.quotas === undefined ? undefined : rateLimitFields(authorized.quotas);
    if (head !== undefined) {
      this.#upstream.tunnel(response, requestId, { method: 'GET', path: request.url!, headers, body: null, route: route.name, answerHeaders }, head, fail);
      return;
    }
    this.#upstream.relay(
      response,
      requestId,
      // Not booked as a stream, yet answered with one: booked on arrival (`principal`).
      { method: request.method!, path: request.url!, headers, body: bodyOf(request, this.#bodyLimit), route: route.name, stream, principal, answerHeaders },
      fail,
    );
  }

  /** Books a stream or tunnel against its credential; false when it was refused or cut at once. */
  #bookStream(request: IncomingMessage, response: ServerResponse, authorized: Authorized, fail: Refuse, head: Buffer | undefined, authorizedSince: number | undefined): boolean {
    // A tunnel is its client socket (detached from the response once upgraded); an event stream, its response.
    const socket = request.socket;
    const close = head !== undefined ? () => socket.destroy() : () => response.destroy();
    let release: ReleaseStream | undefined;
    try {
      release = this.#streams.open(authorized.principal, close, authorizedSince);
    } catch (error) {
      fail(error as GatewayError);
      return false;
    }
    if (release === undefined) return false;
    (head !== undefined ? socket : response).once('close', release);
    return true;
  }
}

/** A GET asking for an event stream (`Accept: text/event-stream`, as `EventSource` sends): a long-lived answer. */
function isEventStreamRequest(request: IncomingMessage): boolean {
  if (request.method !== 'GET') return false;
  const accept = request.headers.accept;
  return accept !== undefined && accept.includes('text/event-stream');
}

/** What is forwarded as the body: nothing, the client's stream, or (chunked) that stream cut off past the limit. */
function bodyOf(request: IncomingMessage, bodyLimit: number): IncomingMessage | Transform | null {
  const { headers } = request;
  if (headers['transfer-encoding'] !== undefined) return request.pipe(bodyLimiter(bodyLimit));
  const declared = headers['content-length'];
  return declared === undefined || declared === '0' ? null : request;
}

export function tooLarge(limit: number): GatewayError {
  return new GatewayError('payload_too_large', `The request body is larger than ${limit} bytes`);
}

/** Passes a chunked body through until it exceeds `limit` bytes, then fails the forward with 413: the upstream never sees its end. */
function bodyLimiter(limit: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      seen += chunk.length;
      if (seen > limit) callback(tooLarge(limit));
      else callback(null, chunk);
    },
  });
}
