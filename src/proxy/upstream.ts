import type { ServerResponse } from 'node:http';
import { Readable, type Duplex } from 'node:stream';
import { Pool, type Dispatcher } from 'undici';
import type { GatewayError } from '../errors/gateway-error.ts';
import type { Principal } from '../policy/principal.ts';
import type { OpenStreams } from './open-streams.ts';
import type { Inspect } from './upstream-answer.ts';
import { UpstreamDeadlines } from './upstream-deadlines.ts';
import { ENDED_UNSENT, Relay, type RelayHost, type Refuse, type UpstreamStatus } from './upstream-relay.ts';
import { Tunnels } from './upstream-tunnels.ts';

export type { Inspect, TakeWhole, UpstreamResponse, WholeAnswer } from './upstream-answer.ts';
export { upstreamError, type Refuse, type UpstreamStatus } from './upstream-relay.ts';

export interface UpstreamOptions {
  /** `UPSTREAM_URL`: its origin; every request keeps its own path. */
  url: string;
  /**
   * Milliseconds from the moment a request is ready to go upstream (the wait for a free
   * connection included) until the upstream's response headers, before 504 (`UPSTREAM_TIMEOUT`).
   */
  timeoutMs: number;
  /** Connections for ordinary requests. Default 128. */
  connections?: number;
  /** Connections for streams (event streams, WebSocket handshakes), apart from the ordinary ones. Default 1024. */
  streamConnections?: number;
  /** Told of every upstream exchange: the route name, the status or how it failed, and its duration. */
  observed?: (route: string, status: UpstreamStatus, seconds: number) => void;
  /** Where an answer that turns out to be an event stream is booked against its credential (see `UpstreamRequest.principal`). */
  streams?: OpenStreams;
}

/** One request for the upstream, already authorized. */
export interface UpstreamRequest {
  method: string;
  /** The request target exactly as received (request-target.ts): path and query, byte for byte. */
  path: string;
  /** Flat `[name, value, …]` (upstream-headers.ts). */
  headers: string[];
  body: Readable | Buffer | string | null;
  /** The route-table name, for the upstream metrics. */
  route: string;
  /** A long-lived answer (an event stream): sent on the streams' own connections, never the ordinary ones. */
  stream?: boolean;
  /**
   * Who sent a request not booked as a stream: if its answer turns out to be an event stream
   * after all (the request did not say it wanted one), the answer is booked against this
   * credential's cap then, and cut when the credential ends. Undefined: never booked.
   */
  principal?: Principal | null;
  /** Response fields of the gateway's own (a limited key's RateLimit), flat `[name, value, …]`: sent instead of the upstream's of these names. */
  answerHeaders?: readonly string[] | undefined;
  /** An answer for this credential alone (an MCP path): the upstream's cache fields for intermediaries (`CDN-Cache-Control`, …) are dropped. */
  privateAnswer?: boolean;
}

/** Connections for ordinary requests, and for streams, unless configured. */
export const DEFAULT_UPSTREAM_CONNECTIONS = 128;
export const DEFAULT_STREAM_CONNECTIONS = 1024;

/**
 * The gateway's one way to the upstream, shared by the generic forwarding and the MCP routes:
 * two undici `Pool`s (keep-alive, no pipelining), one for ordinary requests and one for
 * long-lived answers (event streams, WebSocket tunnels' handshakes), so that streams held
 * open — by one key or many — never take the connections ordinary requests need. A request
 * waits for its response headers at most `timeoutMs` from its dispatch, its wait for a free
 * connection included (`UpstreamDeadlines`).
 *
 * `relay` is the hot path: the request body streams from the client, the response streams
 * into the client's socket as undici parses it, with backpressure both ways and nothing
 * buffered (SSE included: only the wait for response headers is bounded); an `inspect`
 * function may take over answers that must be read before they are sent (MCP). `tunnel`
 * serves WebSocket upgrades.
 */
export class Upstream implements RelayHost {
  readonly #pool: Pool;
  readonly #streamPool: Pool;
  readonly #deadlines: UpstreamDeadlines;
  readonly #observed: UpstreamOptions['observed'];
  readonly #streams: OpenStreams | undefined;
  readonly #tunnels = new Tunnels();

  constructor(options: UpstreamOptions) {
    const origin = new URL(options.url).origin;
    const pool = (connections: number) =>
      new Pool(origin, {
        connections,
        pipelining: 1,
        keepAliveTimeout: 60_000,
        // A backstop only: UpstreamDeadlines bounds the wait from dispatch, this one from the write.
        headersTimeout: options.timeoutMs,
        // Streams (SSE) may idle for long; only the wait for response headers is bounded.
        bodyTimeout: 0,
      });
    this.#pool = pool(options.connections ?? DEFAULT_UPSTREAM_CONNECTIONS);
    this.#streamPool = pool(options.streamConnections ?? DEFAULT_STREAM_CONNECTIONS);
    this.#deadlines = new UpstreamDeadlines(options.timeoutMs);
    this.#observed = options.observed;
    this.#streams = options.streams;
  }

  /**
   * Sends `request` upstream and streams the answer into `response`, with `x-request-id:
   * requestId`. If the upstream fails first, `refuse` answers instead; if it fails mid-body, the
   * client's connection is destroyed, so a truncated body never looks complete. A client that
   * goes away aborts the upstream request.
   */
  relay(response: ServerResponse, requestId: string, request: UpstreamRequest, refuse: Refuse, inspect?: Inspect): void {
    const relay = new Relay(this, response, requestId, request.route, refuse, inspect);
    if (request.body instanceof Readable) relay.requestBody = request.body;
    if (request.stream !== true) relay.principal = request.principal;
    relay.owned = request.answerHeaders;
    relay.privateAnswer = request.privateAnswer === true;
    relay.watchClient();
    this.#deadlines.start(relay, relay.started);
    (request.stream === true ? this.#streamPool : this.#pool).dispatch(
      { method: request.method as Dispatcher.HttpMethod, path: request.path, headers: request.headers, body: request.body },
      relay,
    );
  }

  /**
   * A WebSocket upgrade: the handshake goes upstream; a 101 joins the client's socket and the
   * upstream's byte for byte (sub-protocols and extensions are the two ends' business), any
   * other answer is relayed as a response. `head` is what the client sent after its handshake.
   */
  tunnel(response: ServerResponse, requestId: string, request: UpstreamRequest, head: Buffer, refuse: Refuse): void {
    const relay = new Relay(this, response, requestId, request.route, refuse, undefined, head);
    relay.owned = request.answerHeaders;
    relay.watchClient();
    this.#deadlines.start(relay, relay.started);
    this.#streamPool.dispatch({ method: 'GET', path: request.path, headers: request.headers, body: null, upgrade: 'websocket' }, relay);
  }

  /** Ends every WebSocket tunnel: they hold the server open, and a shutdown does not wait for them. */
  endTunnels(): void {
    this.#tunnels.end();
  }

  /** After the server has closed: drops the upstream connections. */
  async close(): Promise<void> {
    this.endTunnels();
    this.#deadlines.close();
    await Promise.all([this.#pool.destroy(), this.#streamPool.destroy()]);
  }

  /**
   * An answer that turned out to be an event stream, though its request was not booked as
   * one: booked now, so the credential's cap holds and ending the credential cuts it. Over the
   * cap, the exchange is aborted and refused (`too_many_streams`) before anything is sent.
   * False when the answer must not be relayed.
   */
  bookLateStream(relay: Relay, controller: Dispatcher.DispatchController): boolean {
    const streams = this.#streams;
    if (streams === undefined || relay.principal === undefined) return true;
    const response = relay.response;
    let release;
    try {
      release = streams.open(relay.principal, () => response.destroy());
    } catch (error) {
      relay.done = true;
      controller.abort(ENDED_UNSENT);
      this.observe(relay.route, relay.status, relay.started);
      relay.refuse(error as GatewayError);
      return false;
    }
    if (release === undefined) return false;
    response.once('close', release);
    return true;
  }

  /** The wait for `relay`'s response headers is over. */
  answered(relay: Relay): void {
    this.#deadlines.stop(relay);
  }

  /** `relay` is still sending its body when its wait ran out: the bound counts again from now. */
  stillSending(relay: Relay): void {
    this.#deadlines.touch(relay);
  }

  observe(route: string, status: UpstreamStatus, started: number): void {
    this.#observed?.(route, status, (performance.now() - started) / 1000);
  }

  /** Joins two upgraded sockets until either ends. */
  join(client: Duplex, upstream: Duplex, head: Buffer): void {
    this.#tunnels.join(client, upstream, head);
  }
}
