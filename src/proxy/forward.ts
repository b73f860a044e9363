import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods, onRequestHookHandler } from 'fastify';
import { GatewayError } from '../http/errors.ts';
import type { Authorization, Authorized } from './authorize.ts';
import type { Upstream } from './upstream.ts';
import { identityHeadersOf, upstreamHeaderRewriter } from './upstream-headers.ts';

export interface ForwardOptions {
  upstream: Upstream;
  forwardAuthorization: boolean;
  /** Largest body forwarded, in bytes (`BODY_LIMIT`). */
  bodyLimit: number;
  authorize: (request: FastifyRequest) => Authorization;
}

/** The methods forwarded; others get 404 like any unknown endpoint. */
const FORWARDED_METHODS: HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'];

/** Set on an upgrade request by the server's `upgrade` listener: what the client sent after its handshake. */
const kUpgradeHead = Symbol('upgradeHead');

interface UpgradeRequest extends IncomingMessage {
  [kUpgradeHead]?: Buffer;
}

/**
 * Everything that is not the gateway's own endpoint (nor an MCP path) is forwarded — after
 * `authorize` has allowed it, in the route's `onRequest` hook, before any body is read; the
 * hook then hands the request to the upstream and never lets fastify parse it. Responses
 * (including `text/event-stream`) stream through. WebSocket upgrades are routed the same
 * way, so they pass the same hooks and the same decision, then are tunnelled.
 */
export function registerForwarding(app: FastifyInstance, options: ForwardOptions): void {
  const { upstream, authorize, bodyLimit } = options;
  const upstreamHeaders = upstreamHeaderRewriter({ forwardAuthorization: options.forwardAuthorization });

  function forward(request: FastifyRequest, reply: FastifyReply, { route, principal }: Authorized, refuse: (error: GatewayError) => void): void {
    // MCP paths are served by registerMcp, which inspects every message; one reaching the generic proxy would skip that.
    if (route.mcp !== undefined) {
      refuse(new GatewayError('method_not_allowed_for_key', 'MCP requests are only served on their own paths'));
      return;
    }
    const raw = request.raw as UpgradeRequest;
    const headers = upstreamHeaders(request.headers, {
      identity: identityHeadersOf(principal),
      clientAddress: request.ip,
      protocol: request.protocol,
      host: request.headers.host,
      requestId: request.id,
    });
    const upstreamRequest = { method: raw.method!, path: raw.url!, headers, body: bodyOf(raw, bodyLimit), route: route.name };
    const head = raw[kUpgradeHead];
    if (head === undefined) {
      upstream.relay(reply, upstreamRequest, refuse);
    } else if (String(raw.headers.upgrade).toLowerCase() !== 'websocket' || raw.method !== 'GET') {
      refuse(new GatewayError('bad_request', 'Only WebSocket upgrades are forwarded'));
    } else {
      upstream.tunnel(reply, upstreamRequest, head, refuse);
    }
  }

  const onRequest: onRequestHookHandler = (request, reply, done) => {
    const declared = request.headers['content-length'];
    if (declared !== undefined && Number(declared) > bodyLimit) {
      // Answered before the body is read; closing (lingering) bounds what is still read of it.
      reply.header('connection', 'close');
      done(tooLarge(bodyLimit));
      return;
    }
    let authorization: Authorization;
    try {
      authorization = authorize(request);
    } catch (error) {
      done(error as Error);
      return;
    }
    if (!(authorization instanceof Promise)) {
      // Synchronous: fastify's hook runner answers anything thrown here.
      forward(request, reply, authorization, done);
      return;
    }
    authorization.then((authorized) => {
      try {
        forward(request, reply, authorized, done);
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
