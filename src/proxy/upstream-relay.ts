import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../errors/gateway-error.ts';
import type { Principal } from '../policy/principal.ts';
import { UpstreamBody, WholeBody, type Inspect } from './upstream-answer.ts';
import type { AwaitingHeaders } from './upstream-deadlines.ts';
import { clientResponseHeaders } from './upstream-headers.ts';
import { switchingProtocolsHead } from './upstream-tunnels.ts';

/** An HTTP status from the upstream, or how the exchange failed without one. */
export type UpstreamStatus = number | 'error' | 'timeout';

/** Called when the upstream fails before anything was sent to the client: answer it (502, 504, 413). */
export type Refuse = (error: GatewayError) => void;

/** What a relay tells, and asks of, the Upstream that dispatched it. */
export interface RelayHost {
  /** The wait for `relay`'s response headers is over. */
  answered(relay: Relay): void;
  /** `relay` is still sending its body when its wait ran out: the bound counts again from now. */
  stillSending(relay: Relay): void;
  observe(route: string, status: UpstreamStatus, started: number): void;
  /** An event-stream answer to a request not booked as a stream; false when it must not be relayed. */
  bookLateStream(relay: Relay, controller: Dispatcher.DispatchController): boolean;
  /** Joins two upgraded sockets until either ends. */
  join(client: Duplex, upstream: Duplex, head: Buffer): void;
}

const kRelay = Symbol('relay');

interface RelayedResponse extends ServerResponse {
  [kRelay]?: Relay;
}

/** Why a relay was aborted from our side: the client left. */
const CLIENT_GONE = new Error('The client closed the connection');
/** Why a relay that ended while it waited for a connection (answered 504, or its client left) is dropped once it has one. */
export const ENDED_UNSENT = new Error('The exchange ended before the request was sent');

/**
 * One relayed exchange, as an undici dispatch handler: no promise, stream or closure per
 * request. Backpressure: a full client socket pauses the upstream's, `drain` resumes it.
 */
export class Relay implements Dispatcher.DispatchHandler, AwaitingHeaders {
  readonly upstream: RelayHost;
  readonly response: RelayedResponse;
  readonly requestId: string;
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
  whole: WholeBody | undefined = undefined;
  /** The request's body when it streams from the client (not held in memory). */
  requestBody: Readable | undefined = undefined;
  /** Who sent it, when an event-stream answer is to be booked on arrival (`UpstreamRequest.principal`). */
  principal: Principal | null | undefined = undefined;
  /** Response fields of the gateway's own, flat (`UpstreamRequest.answerHeaders`). */
  owned: readonly string[] | undefined = undefined;
  /** `UpstreamRequest.privateAnswer`. */
  privateAnswer = false;
  // AwaitingHeaders: linked into the upstream's deadlines until the response headers arrive.
  since = 0;
  previous: AwaitingHeaders | undefined = undefined;
  next: AwaitingHeaders | undefined = undefined;
  linked = false;

  constructor(
    upstream: RelayHost,
    response: ServerResponse,
    requestId: string,
    route: string,
    refuse: Refuse,
    inspect: Inspect | undefined,
    head?: Buffer,
  ) {
    this.upstream = upstream;
    this.response = response;
    this.requestId = requestId;
    this.route = route;
    this.refuse = refuse;
    this.inspect = inspect;
    this.head = head;
  }

  /** From now on, a client that goes away ends the exchange (`onClientClose`). */
  watchClient(): void {
    this.response[kRelay] = this;
    this.response.once('close', onClientClose);
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
      this.body = new UpstreamBody(controller, CLIENT_GONE);
      takeOver({ statusCode, headers, body: this.body });
      return;
    }
    if (takeOver !== undefined) {
      this.whole = new WholeBody(takeOver, headers);
      return;
    }
    if (this.principal !== undefined && isEventStream(headers['content-type']) && !this.upstream.bookLateStream(this, controller)) return;
    this.response.writeHead(statusCode, clientResponseHeaders(headers, this.requestId, this.owned, this.privateAnswer));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const whole = this.whole;
    if (whole !== undefined) {
      if (whole.add(chunk)) return;
      this.done = true;
      controller.abort(ENDED_UNSENT);
      this.upstream.observe(this.route, 'error', this.started);
      whole.tooLarge();
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
    const whole = this.whole;
    if (whole !== undefined) {
      this.upstream.observe(this.route, this.status, this.started);
      whole.answer(this.status);
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
      if (error !== CLIENT_GONE) this.whole.fail(upstreamError(error));
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
    const raw = this.response;
    const client = raw.socket;
    if (client === null || client.destroyed) {
      socket.destroy();
      return;
    }
    raw.detachSocket(client);
    client.write(switchingProtocolsHead(headers, this.requestId, this.owned));
    this.upstream.observe(this.route, statusCode, this.started);
    this.upstream.join(client, socket, this.head ?? Buffer.alloc(0));
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
