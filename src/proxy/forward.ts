import httpProxy from '@fastify/http-proxy';
import type { IncomingHttpHeaders } from 'node:http';
import { Readable, Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError } from '../http/errors.ts';
import type { Principal } from '../policy/principal.ts';
import type { Authorized } from './authorize.ts';
import { identityHeadersOf, rewriteUpstreamHeaders } from './upstream-headers.ts';

export interface ForwardOptions {
  upstreamUrl: string;
  /** Milliseconds to wait for the upstream's response headers before 504. */
  upstreamTimeoutMs: number;
  forwardAuthorization: boolean;
  /** Largest body forwarded, in bytes (`BODY_LIMIT`). */
  bodyLimit: number;
  authorize: (request: FastifyRequest) => Promise<Authorized>;
  /** Told of every upstream exchange: the route name, the status or how it failed, and its duration. */
  upstreamObserved?: (route: string, status: number | 'error' | 'timeout', seconds: number) => void;
}

interface Forwarding {
  principal: Principal | null;
  route: string;
  started: number;
}

/**
 * Everything that is not the gateway's own endpoint is forwarded — after `authorize` has
 * allowed it, in an `onRequest` hook, before any body is read. Responses (including
 * `text/event-stream`) stream through; WebSocket upgrades pass the same hook.
 */
export async function registerForwarding(app: FastifyInstance, options: ForwardOptions): Promise<void> {
  const forwarding = new WeakMap<FastifyRequest, Forwarding>();
  const observed = options.upstreamObserved;
  const upstreamHeaders = (request: FastifyRequest, headers: IncomingHttpHeaders) =>
    rewriteUpstreamHeaders(headers, {
      identity: identityHeadersOf(forwarding.get(request)?.principal ?? null),
      clientAddress: request.ip,
      protocol: request.protocol,
      host: request.headers.host,
      forwardAuthorization: options.forwardAuthorization,
      requestId: request.id,
    });
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (request) => {
      refuseOversizedBody(request, options.bodyLimit);
      const { principal, route } = await options.authorize(request);
      forwarding.set(request, { principal, route: route.name, started: performance.now() });
    });
    scope.addHook('preHandler', async (request) => {
      if (request.body instanceof Readable && request.headers['content-length'] === undefined) {
        request.body = request.body.pipe(bodyLimiter(options.bodyLimit));
      }
    });
    if (observed) {
      scope.addHook('onResponse', async (request, reply) => {
        const entry = forwarding.get(request);
        if (entry) observed(entry.route, reply.statusCode, (performance.now() - entry.started) / 1000);
      });
    }
    await scope.register(httpProxy, {
      upstream: options.upstreamUrl,
      prefix: '/',
      websocket: true,
      disableRequestLogging: true,
      undici: {
        connections: 128,
        pipelining: 1,
        keepAliveTimeout: 60_000,
        headersTimeout: options.upstreamTimeoutMs,
        // Streams (SSE) may idle for long; only the wait for response headers is bounded.
        bodyTimeout: 0,
      },
      // The upgrade passed the same onRequest hook; the upstream's handshake carries the same rewritten headers.
      wsClientOptions: {
        rewriteRequestHeaders: (_headers: unknown, request: FastifyRequest) => upstreamHeaders(request, webSocketHeadersOf(request.headers)),
      },
      replyOptions: {
        rewriteRequestHeaders: (request: FastifyRequest, headers: IncomingHttpHeaders) => upstreamHeaders(request, headers),
        // reply.send(error) goes through the app's error handler: problem+json 502 or 504.
        onError: (reply: FastifyReply, { error }: { error: Error & { code?: string; statusCode?: number } }) => {
          const gatewayError = upstreamError(error);
          const entry = forwarding.get(reply.request);
          if (entry && observed) {
            observed(entry.route, gatewayError.code === 'upstream_timeout' ? 'timeout' : 'error', (performance.now() - entry.started) / 1000);
            forwarding.delete(reply.request);
          }
          reply.send(gatewayError);
        },
      },
    } as unknown as Parameters<typeof httpProxy>[1]);
  });
}

/** The WebSocket client opens its own handshake: the client's handshake and hop-by-hop headers are not copied. */
const WEBSOCKET_OWN = /^(?:host|connection|upgrade|keep-alive|te|trailer|transfer-encoding|proxy-.*|content-length|sec-websocket-.*)$/;

function webSocketHeadersOf(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const copy: IncomingHttpHeaders = {};
  const named = new Set(String(headers.connection ?? '').toLowerCase().split(',').map((name) => name.trim()));
  for (const [name, value] of Object.entries(headers)) {
    if (!WEBSOCKET_OWN.test(name) && !named.has(name)) copy[name] = value;
  }
  return copy;
}

/**
 * A declared body over the limit is refused before a byte of it is read. A chunked body is
 * streamed to the upstream as it comes; its size is the upstream's to bound.
 */
function refuseOversizedBody(request: FastifyRequest, bodyLimit: number): void {
  const declared = request.headers['content-length'];
  if (declared !== undefined && Number(declared) > bodyLimit) {
    throw new GatewayError('payload_too_large', `The request body is larger than ${bodyLimit} bytes`);
  }
}

const BODY_TOO_LARGE = 'GATEHOUSE_BODY_TOO_LARGE';

/** Passes a chunked body through until it exceeds `limit` bytes, then fails the forward with 413. */
function bodyLimiter(limit: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      seen += chunk.length;
      if (seen > limit) callback(Object.assign(new Error(`The request body is larger than ${limit} bytes`), { code: BODY_TOO_LARGE }));
      else callback(null, chunk);
    },
  });
}

function upstreamError(error: Error & { code?: string; statusCode?: number }): GatewayError {
  const tooLarge = findCause(error, (cause) => cause.code === BODY_TOO_LARGE);
  if (tooLarge) return new GatewayError('payload_too_large', tooLarge.message);
  const timedOut = error.statusCode === 504 || error.code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT' || error.code === 'UND_ERR_HEADERS_TIMEOUT';
  return timedOut
    ? new GatewayError('upstream_timeout', 'The upstream did not answer in time', { cause: error })
    : new GatewayError('upstream_unavailable', 'The upstream could not be reached', { cause: error });
}

function findCause(error: unknown, test: (cause: Error & { code?: string }) => boolean): (Error & { code?: string }) | undefined {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth++) {
    if (test(cause)) return cause;
  }
  return undefined;
}
