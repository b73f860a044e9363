import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { Readable, type Duplex } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { Pool, type Dispatcher } from 'undici';
import { GatewayError } from '../errors/gateway-error.ts';
import type { Principal } from '../policy/principal.ts';
import type { OpenStreams } from './open-streams.ts';
import { UpstreamDeadlines, type AwaitingHeaders } from './upstream-deadlines.ts';
import { clientResponseHeaders } from './upstream-headers.ts';

/** An HTTP status from the upstream, or how the exchange failed without one. */
export type UpstreamStatus = number | 'error' | 'timeout';

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
}

export interface UpstreamResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Readable;
}

/** Called when the upstream fails before anything was sent to the client: answer it (502, 504, 413). */
export type Refuse = (error: GatewayError) => void;

/** A taken-over answer read whole. */
export interface WholeAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * Takes a whole answer over: its body is collected as it arrives, with no stream in between,
 * and `whole` is called once with it, or with the failure (a body over `maxBytes` is a 502 and
 * the upstream request is aborted). Not called when the client left first.
 */
export interface TakeWhole {
  readonly maxBytes: number;
  whole(answer: WholeAnswer | GatewayError): void;
}

/**
 * Looks at the upstream's status and headers before anything is sent: undefined to relay the
 * response as it is, or a take-over that answers the client itself: a function given the body
 * as a stream, or a `TakeWhole` given the body read whole.
 */
export type Inspect = (statusCode: number, headers: IncomingHttpHeaders) => ((response: UpstreamResponse) => void) | TakeWhole | undefined;

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
export class Upstream {
  readonly #pool: Pool;
  readonly #streamPool: Pool;
  readonly #deadlines: UpstreamDeadlines;
  readonly #observed: UpstreamOptions['observed'];
  readonly #streams: OpenStreams | undefined;
  readonly #tunnels = new Set<Duplex>();
  #closing = false;

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
   * requestId` (a fastify `reply` is hijacked once the upstream's headers arrive; the fast lane
   * has none). If the upstream fails first, `refuse` answers instead; if it fails mid-body, the
   * client's connection is destroyed, so a truncated body never looks complete. A client that
   * goes away aborts the upstream request.
   */
  relay(response: ServerResponse, requestId: string, request: UpstreamRequest, refuse: Refuse, inspect?: Inspect, reply?: FastifyReply): void {
    const relay = new Relay(this, response as RelayedResponse, requestId, reply, request.route, refuse, inspect);
    relay.response[kRelay] = relay;
    if (request.body instanceof Readable) relay.requestBody = request.body;
    if (request.stream !== true) relay.principal = request.principal;
    response.once('close', onClientClose);
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
  tunnel(reply: FastifyReply, request: UpstreamRequest, head: Buffer, refuse: Refuse): void {
    const relay = new Relay(this, reply.raw as RelayedResponse, reply.request.id, reply, request.route, refuse, undefined, head);
    relay.response[kRelay] = relay;
    reply.raw.once('close', onClientClose);
    this.#deadlines.start(relay, relay.started);
    this.#streamPool.dispatch({ method: 'GET', path: request.path, headers: request.headers, body: null, upgrade: 'websocket' }, relay);
  }

  /** Ends every WebSocket tunnel: they hold the server open, and a shutdown does not wait for them. */
  endTunnels(): void {
    this.#closing = true;
    for (const socket of this.#tunnels) socket.destroy();
    this.#tunnels.clear();
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
    if (this.#closing) {
      client.destroy();
      upstream.destroy();
      return;
    }
    const tunnels = this.#tunnels;
    tunnels.add(client);
    const end = () => {
      tunnels.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    if (head.length > 0) upstream.write(head);
    client.pipe(upstream);
    upstream.pipe(client);
  }
}

const kRelay = Symbol('relay');

interface RelayedResponse extends ServerResponse {
  [kRelay]?: Relay;
}

/** Why a relay was aborted from our side: the client left. */
const CLIENT_GONE = new Error('The client closed the connection');
/** Why a relay that ended while it waited for a connection (answered 504, or its client left) is dropped once it has one. */
const ENDED_UNSENT = new Error('The exchange ended before the request was sent');

/**
 * One relayed exchange, as an undici dispatch handler: no promise, stream or closure per
 * request. Backpressure: a full client socket pauses the upstream's, `drain` resumes it.
 */
class Relay implements Dispatcher.DispatchHandler, AwaitingHeaders {
  readonly upstream: Upstream;
  readonly response: RelayedResponse;
  readonly requestId: string;
  /** Hijacked when the answer starts; undefined on the fast lane, where fastify never saw the request. */
  readonly reply: FastifyReply | undefined;
  readonly route: string;
  readonly refuse: Refuse;
  readonly inspect: Inspect | undefined;
  readonly head: Buffer | undefined;
  readonly started = performance.now();
  controller: Dispatcher.DispatchController | undefined = undefined;
  /** The upstream's status, once its headers arrived. */
  status = 0;
  /** The exchange is over (ended, failed or upgraded). */
  done = false;
  draining = false;
  /** The body, when `inspect` took the response over as a stream. */
  body: UpstreamBody | undefined = undefined;
  /** When `inspect` took the response over whole: where it goes, and what arrived so far. */
  whole: TakeWhole | undefined = undefined;
  headers: IncomingHttpHeaders | undefined = undefined;
  chunks: Buffer[] | undefined = undefined;
  size = 0;
  /** The request's body when it streams from the client (not held in memory). */
  requestBody: Readable | undefined = undefined;
  /** Who sent it, when an event-stream answer is to be booked on arrival (`UpstreamRequest.principal`). */
  principal: Principal | null | undefined = undefined;
  // AwaitingHeaders: linked into the upstream's deadlines until the response headers arrive.
  since = 0;
  previous: AwaitingHeaders | undefined = undefined;
  next: AwaitingHeaders | undefined = undefined;
  linked = false;

  constructor(
    upstream: Upstream,
    response: RelayedResponse,
    requestId: string,
    reply: FastifyReply | undefined,
    route: string,
    refuse: Refuse,
    inspect: Inspect | undefined,
    head?: Buffer,
  ) {
    this.upstream = upstream;
    this.response = response;
    this.requestId = requestId;
    this.reply = reply;
    this.route = route;
    this.refuse = refuse;
    this.inspect = inspect;
    this.head = head;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // Answered 504 while it waited for a connection, or the client left: nothing is sent.
    if (this.done) controller.abort(ENDED_UNSENT);
    else if (this.response.destroyed) controller.abort(CLIENT_GONE);
  }

  /**
   * The wait for response headers reached `UPSTREAM_TIMEOUT`. A request still waiting for a
   * connection is answered now (undici drops it when a connection frees: `onRequestStart`); one
   * sent is aborted, which answers it (`onResponseError`). A body still streaming from the
   * client is not the upstream's delay: its wait starts again (a stalled body is cut by undici's
   * own timeout, refreshed by every chunk written, and the server's `REQUEST_TIMEOUT`).
   */
  expire(): void {
    if (this.done) return;
    const controller = this.controller;
    if (controller !== undefined && this.requestBody !== undefined && !this.requestBody.readableEnded) {
      this.upstream.stillSending(this);
      return;
    }
    const timeout = new GatewayError('upstream_timeout', 'The upstream did not answer in time');
    if (controller !== undefined) {
      controller.abort(timeout);
      return;
    }
    this.done = true;
    this.upstream.observe(this.route, 'timeout', this.started);
    this.refuse(timeout);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.upstream.answered(this);
    this.status = statusCode;
    const takeOver = this.inspect?.(statusCode, headers);
    if (typeof takeOver === 'function') {
      this.body = new UpstreamBody(controller);
      takeOver({ statusCode, headers, body: this.body });
      return;
    }
    if (takeOver !== undefined) {
      this.whole = takeOver;
      this.headers = headers;
      this.chunks = [];
      return;
    }
    if (this.principal !== undefined && isEventStream(headers['content-type']) && !this.upstream.bookLateStream(this, controller)) return;
    this.reply?.hijack();
    this.response.writeHead(statusCode, clientResponseHeaders(headers, this.requestId));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.chunks !== undefined) {
      this.size += chunk.length;
      if (this.size <= this.whole!.maxBytes) {
        this.chunks.push(chunk);
        return;
      }
      this.done = true;
      this.chunks = [];
      controller.abort(ENDED_UNSENT);
      this.upstream.observe(this.route, 'error', this.started);
      this.whole!.whole(new GatewayError('upstream_unavailable', `The upstream's answer is larger than ${this.whole!.maxBytes} bytes, more than the gateway inspects`));
      return;
    }
    if (this.body !== undefined) {
      if (!this.body.push(chunk)) controller.pause();
      return;
    }
    const raw = this.response;
    if (raw.write(chunk)) return;
    controller.pause();
    if (!this.draining) {
      this.draining = true;
      raw.on('drain', onClientDrain);
    }
  }

  onResponseEnd(): void {
    this.done = true;
    const chunks = this.chunks;
    if (chunks !== undefined) {
      this.upstream.observe(this.route, this.status, this.started);
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.size);
      this.whole!.whole({ statusCode: this.status, headers: this.headers!, body });
      return;
    }
    if (this.body !== undefined) this.body.push(null);
    else this.response.end();
    this.upstream.observe(this.route, this.status, this.started);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.upstream.answered(this);
    if (this.done) return;
    this.done = true;
    if (this.body !== undefined) {
      // Whoever took the response over sees the failure on its stream.
      this.body.destroy(error);
      this.upstream.observe(this.route, error === CLIENT_GONE ? this.status : 'error', this.started);
      return;
    }
    if (this.whole !== undefined) {
      this.upstream.observe(this.route, error === CLIENT_GONE ? this.status : 'error', this.started);
      if (error !== CLIENT_GONE) this.whole.whole(upstreamError(error));
      return;
    }
    if (error === CLIENT_GONE) {
      if (this.status !== 0) this.upstream.observe(this.route, this.status, this.started);
      return;
    }
    if (this.status !== 0 || this.response.headersSent) {
      // Part of the answer is out: only a broken connection tells the client it is incomplete.
      this.response.destroy();
      this.upstream.observe(this.route, 'error', this.started);
      return;
    }
    const refusal = upstreamError(error);
    this.upstream.observe(this.route, statusOfFailure(refusal), this.started);
    this.refuse(refusal);
  }

  onRequestUpgrade(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.upstream.answered(this);
    this.done = true;
    this.status = statusCode;
    this.reply?.hijack();
    const raw = this.response;
    const client = raw.socket;
    if (client === null || client.destroyed) {
      socket.destroy();
      return;
    }
    raw.detachSocket(client);
    let head = `HTTP/1.1 101 Switching Protocols\r\n`;
    for (const name in headers) {
      const value = headers[name];
      if (value === undefined || name === 'x-request-id') continue;
      for (const each of typeof value === 'string' ? [value] : value) head += `${name}: ${each}\r\n`;
    }
    client.write(`${head}x-request-id: ${this.requestId}\r\n\r\n`);
    this.upstream.observe(this.route, statusCode, this.started);
    this.upstream.join(client, socket, this.head ?? Buffer.alloc(0));
  }
}

/** A taken-over response's body: reading resumes the upstream's socket, destroying it aborts the request. */
class UpstreamBody extends Readable {
  readonly #controller: Dispatcher.DispatchController;

  constructor(controller: Dispatcher.DispatchController) {
    super();
    this.#controller = controller;
  }

  override _read(): void {
    this.#controller.resume();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.readableEnded && !this.#controller.aborted) this.#controller.abort(error ?? CLIENT_GONE);
    callback(error);
  }
}

function onClientClose(this: RelayedResponse): void {
  const relay = this[kRelay];
  if (relay === undefined || relay.done) return;
  if (relay.controller !== undefined) {
    relay.controller.abort(CLIENT_GONE);
    return;
  }
  // Still waiting for a connection: over now, so its deadline neither answers a client that left
  // nor counts an upstream timeout; undici drops it when a connection frees (`onRequestStart`).
  relay.done = true;
  relay.upstream.answered(relay);
}

function onClientDrain(this: RelayedResponse): void {
  this[kRelay]?.controller?.resume();
}

/** Whether a response's `Content-Type` is an event stream; the first character rules out the common answers at once. */
function isEventStream(contentType: string | string[] | undefined): boolean {
  if (typeof contentType !== 'string') return false;
  const first = contentType.charCodeAt(0);
  if (first !== 116 && first !== 84 && first !== 32 && first !== 9) return false;
  return /^[ \t]*text\/event-stream[ \t]*(?:;|$)/i.test(contentType);
}

/** A GatewayError for an upstream failure: one the gateway raised itself (a body over the limit), 504 on the headers timeout, 502 otherwise. */
export function upstreamError(error: unknown): GatewayError {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth++) {
    if (cause instanceof GatewayError) return cause;
  }
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'UND_ERR_HEADERS_TIMEOUT'
    ? new GatewayError('upstream_timeout', 'The upstream did not answer in time', { cause: error })
    : new GatewayError('upstream_unavailable', 'The upstream could not be reached', { cause: error });
}

function statusOfFailure(error: GatewayError): UpstreamStatus {
  return error.code === 'upstream_timeout' ? 'timeout' : 'error';
}
