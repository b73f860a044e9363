import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods, onRequestHookHandler } from 'fastify';
import { GatewayError } from '../errors/gateway-error.ts';
import type { Authorization, Authorized } from './authorize.ts';
import { takeHandOver } from './hand-over.ts';
import type { OpenStreams, ReleaseStream } from './open-streams.ts';
import type { Refuse, Upstream } from './upstream.ts';
import { forwardContextOf, upstreamHeaderRewriter } from './upstream-headers.ts';

export interface ForwardOptions {
  upstream: Upstream;
  forwardAuthorization: boolean;
  /** Largest body forwarded, in bytes (`BODY_LIMIT`). */
  bodyLimit: number;
  authorize: (request: IncomingMessage) => Authorization;
  /** Where streams and tunnels are booked against their credential's cap, and cut when it ends. */
  streams: OpenStreams;
}

/** The methods forwarded; others get 404 like any unknown endpoint. */
export const FORWARDED_METHODS: HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'];

/** Set on an upgrade request by the server's `upgrade` listener: what the client sent after its handshake. */
const kUpgradeHead = Symbol('upgradeHead');

interface UpgradeRequest extends IncomingMessage {
  [kUpgradeHead]?: Buffer;
}

/**
 * Sends an authorized request upstream and its answer back, or (with `head`: a WebSocket
 * upgrade, which only fastify's route receives) tunnels it. Shared by the fast lane and
 * fastify's forwarding route, so a request is forwarded the same way whichever of the two took it.
 * `authorizedSince` (`performance.now()` from when the credential check began) is given when
 * that check was asynchronous: a stream opened on it is cut if its key was evicted meanwhile.
 */
export type Forwarder = (
  request: IncomingMessage,
  response: ServerResponse,
  requestId: string,
  authorized: Authorized,
  refuse: Refuse,
  reply?: FastifyReply,
  head?: Buffer,
  authorizedSince?: number,
) => void;

export function createForwarder(options: Pick<ForwardOptions, 'upstream' | 'forwardAuthorization' | 'bodyLimit' | 'streams'>): Forwarder {
  const { upstream, bodyLimit, streams } = options;
  const upstreamHeaders = upstreamHeaderRewriter({ forwardAuthorization: options.forwardAuthorization });
  return function forward(request, response, requestId, { route, principal }, refuse, reply, head, authorizedSince) {
    // MCP paths are served by the MCP handler, which inspects every message; one reaching the generic proxy would skip that.
    if (route.mcp !== undefined) {
      refuse(new GatewayError('method_not_allowed_for_key', 'MCP requests are only served on their own paths'));
      return;
    }
    if (head !== undefined && (String(request.headers.upgrade).toLowerCase() !== 'websocket' || request.method !== 'GET' || reply === undefined)) {
      refuse(new GatewayError('bad_request', 'Only WebSocket upgrades are forwarded'));
      return;
    }
    const stream = head !== undefined || isEventStreamRequest(request);
    let release: ReleaseStream | undefined;
    if (stream) {
      // A tunnel is its client socket (detached from the response once upgraded); an event stream, its response.
      const socket = request.socket;
      const close = head !== undefined ? () => socket.destroy() : () => response.destroy();
      try {
        release = streams.open(principal, close, authorizedSince);
      } catch (error) {
        refuse(error as GatewayError);
        return;
      }
      if (release === undefined) return;
      (head !== undefined ? socket : response).once('close', release);
    }
    const headers = upstreamHeaders(request.headers, forwardContextOf(request, principal, requestId));
    if (head !== undefined) {
      upstream.tunnel(reply!, { method: 'GET', path: request.url!, headers, body: null, route: route.name }, head, refuse);
      return;
    }
    upstream.relay(
      response,
      requestId,
      // Not booked as a stream, yet answered with one: booked on arrival (`principal`).
      { method: request.method!, path: request.url!, headers, body: bodyOf(request, bodyLimit), route: route.name, stream, principal },
      refuse,
      undefined,
      reply,
    );
  };
}

/** A GET asking for an event stream (`Accept: text/event-stream`, as `EventSource` sends): a long-lived answer. */
function isEventStreamRequest(request: IncomingMessage): boolean {
  if (request.method !== 'GET') return false;
  const accept = request.headers.accept;
  return accept !== undefined && accept.includes('text/event-stream');
}

/**
 * Everything that is not the gateway's own endpoint (nor an MCP path) and that the fast lane
 * did not take is forwarded here, after `authorize` has allowed it, or refused (the fast lane's
 * hand-over: a failure it met, such as the store down or an upstream failure), in the route's `onRequest` hook before
 * any body is read; the hook then hands the request to the upstream and never lets fastify
 * parse it. Responses (including `text/event-stream`) stream through. WebSocket upgrades are
 * routed the same way, so they pass the same hooks and the same decision, then are tunnelled.
 */
export function registerForwarding(app: FastifyInstance, options: ForwardOptions): Forwarder {
  const { upstream, authorize, bodyLimit } = options;
  const forwardRequest = createForwarder(options);

  function forward(request: FastifyRequest, reply: FastifyReply, authorized: Authorized, refuse: (error: GatewayError) => void, authorizedSince?: number): void {
    const raw = request.raw as UpgradeRequest;
    forwardRequest(raw, reply.raw, request.id, authorized, refuse, reply, raw[kUpgradeHead], authorizedSince);
  }

  const onRequest: onRequestHookHandler = (request, reply, done) => {
    const handedOver = takeHandOver(request.raw);
    if (handedOver !== undefined) {
      // Decided (and counted) by the fast lane already: only the answer is fastify's.
      done(handedOver.error);
      return;
    }
    const declared = request.headers['content-length'];
    if (declared !== undefined && Number(declared) > bodyLimit) {
      // Answered before the body is read; closing (lingering) bounds what is still read of it.
      reply.header('connection', 'close');
      done(tooLarge(bodyLimit));
      return;
    }
    let authorization: Authorization;
    try {
      authorization = authorize(request.raw);
    } catch (error) {
      done(error as Error);
      return;
    }
    if (!(authorization instanceof Promise)) {
      // Synchronous: fastify's hook runner answers anything thrown here.
      forward(request, reply, authorization, done);
      return;
    }
    const authorizedSince = performance.now();
    authorization.then((authorized) => {
      try {
        forward(request, reply, authorized, done, authorizedSince);
      } catch (error) {
        done(error as Error);
      }
    }, done);
  };

  for (const url of ['/', '/*']) {
    app.route({
      method: FORWARDED_METHODS,
      url,
      exposeHeadRoute: false,
      config: { forwarded: true },
      onRequest,
      // Never reached: the hook above answers every request, by forwarding or refusing it.
      handler: async () => {
        throw new GatewayError('internal_error', 'The request was not forwarded');
      },
    });
  }

  app.server.on('upgrade', (request: UpgradeRequest, socket: Duplex, head: Buffer) => {
    request[kUpgradeHead] = head;
    const response = new ServerResponse(request);
    response.assignSocket(socket as ConstructorParameters<typeof ServerResponse>[0]['socket'] & object);
    // A refusal is the last thing said on this connection.
    response.on('finish', () => socket.destroy());
    socket.on('error', () => socket.destroy());
    app.routing(request, response);
  });
  app.addHook('preClose', (done) => {
    upstream.endTunnels();
    done();
  });
  return forwardRequest;
}

/** What is forwarded as the body: nothing, the client's stream, or (chunked) that stream cut off past the limit. */
function bodyOf(request: IncomingMessage, bodyLimit: number): IncomingMessage | Transform | null {
  const { headers } = request;
  if (headers['transfer-encoding'] !== undefined) return request.pipe(bodyLimiter(bodyLimit));
  const declared = headers['content-length'];
  return declared === undefined || declared === '0' ? null : request;
}

function tooLarge(limit: number): GatewayError {
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
