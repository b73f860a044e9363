import httpProxy from '@fastify/http-proxy';
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
  authorize: (request: FastifyRequest) => Promise<Authorized>;
}

/**
 * Everything that is not the gateway's own endpoint is forwarded — after `authorize` has
 * allowed it, in an `onRequest` hook, before any body is read. Responses (including
 * `text/event-stream`) stream through; WebSocket upgrades pass the same hook.
 */
export async function registerForwarding(app: FastifyInstance, options: ForwardOptions): Promise<void> {
  const principals = new WeakMap<FastifyRequest, Principal | null>();
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (request) => {
      const { principal } = await options.authorize(request);
      principals.set(request, principal);
    });
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
      replyOptions: {
        rewriteRequestHeaders: (request, headers) =>
          rewriteUpstreamHeaders(headers, {
            identity: identityHeadersOf(principals.get(request) ?? null),
            clientAddress: request.ip,
            protocol: request.protocol,
            host: request.headers.host,
            forwardAuthorization: options.forwardAuthorization,
          }),
        // reply.send(error) goes through the app's error handler: problem+json 502 or 504.
        onError: (reply: FastifyReply, { error }: { error: Error & { code?: string; statusCode?: number } }) => {
          reply.send(upstreamError(error));
        },
      },
    } as Parameters<typeof httpProxy>[1]);
  });
}

function upstreamError(error: Error & { code?: string; statusCode?: number }): GatewayError {
  const timedOut = error.statusCode === 504 || error.code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT';
  return timedOut
    ? new GatewayError('upstream_timeout', 'The upstream did not answer in time', { cause: error })
    : new GatewayError('upstream_unavailable', 'The upstream could not be reached', { cause: error });
}
