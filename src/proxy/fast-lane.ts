import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GatewayError } from '../http/errors.ts';
import { isLingering } from '../http/lingering-close.ts';
import { requestIdOf } from '../http/request-id.ts';
import type { Authorization } from './authorize.ts';
import { FORWARDED_METHODS, type Forwarder } from './forward.ts';
import type { ForwardedRoutes } from './forwarded-routes.ts';
import { handOver } from './hand-over.ts';
import { assertSingleHeaders } from './raw-headers.ts';
import { parseRequestTarget } from './request-target.ts';

export interface FastLaneOptions {
  routes: ForwardedRoutes;
  authorize: (request: IncomingMessage) => Authorization;
  forward: Forwarder;
  /** `BODY_LIMIT`: a larger declared body is left to fastify's route, which refuses it. */
  bodyLimit: number;
  /** Fastify's request handler (`app.routing`): everything the lane does not serve goes there. */
  fastify: (request: IncomingMessage, response: ServerResponse) => void;
}

const FORWARDED: ReadonlySet<string> = new Set(FORWARDED_METHODS);

/**
 * The server's request listener, in front of fastify. A request that fastify would forward and
 * whose credential is decided from memory (a cached API key or admin token: no promise, no I/O)
 * is forwarded from here, with none of fastify's per-request objects — the allow path costs
 * what a bare `node:http` proxy costs, plus the lookups. Everything else goes to fastify as it
 * would without the lane: the gateway's own endpoints, MCP paths, malformed or oversized
 * requests, credentials that need a store read or an argon2id verify (the pending decision is
 * handed over), refusals and upstream failures (handed over, answered by the one error handler).
 */
export function createFastLane(options: FastLaneOptions): { listener: (request: IncomingMessage, response: ServerResponse) => void; close: () => void } {
  const { routes, authorize, forward, bodyLimit, fastify } = options;
  let closing = false;

  function listener(request: IncomingMessage, response: ServerResponse): void {
    if (closing || !FORWARDED.has(request.method!) || isLingering(request.socket) || !isPlainRequest(request)) {
      fastify(request, response);
      return;
    }
    const requestId = requestIdOf(request);
    let authorization: Authorization;
    try {
      authorization = authorize(request);
    } catch (error) {
      handOver(request, { requestId, error: error as Error });
      fastify(request, response);
      return;
    }
    if (authorization instanceof Promise) {
      handOver(request, { requestId, authorization });
      fastify(request, response);
      return;
    }
    forward(request, response, requestId, authorization, (error: GatewayError) => {
      // Nothing was sent yet: fastify answers it, as it answers every refusal.
      handOver(request, { requestId, error });
      fastify(request, response);
    });
  }

  /** What fastify's forwarding route would see and serve as it is: anything else keeps fastify's answer. */
  function isPlainRequest(request: IncomingMessage): boolean {
    const declared = request.headers['content-length'];
    if (declared !== undefined && Number(declared) > bodyLimit) return false;
    let path: string;
    try {
      path = parseRequestTarget(request.url!).path;
      assertSingleHeaders(request.rawHeaders);
    } catch {
      return false;
    }
    return routes.isForwarded(request.method!, path);
  }

  return {
    listener,
    /** From now on every request goes to fastify, which answers 503 while it drains. */
    close: () => {
      closing = true;
    },
  };
}
