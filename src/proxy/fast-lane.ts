import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { sendError } from '../http/error-handler.ts';
import type { McpHandler } from '../mcp/mcp-handler.ts';
import { GatewayError } from '../errors/gateway-error.ts';
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
  /** Given the request target's path, already checked here. */
  authorize: (request: IncomingMessage, path: string) => Authorization;
  forward: Forwarder;
  /** `BODY_LIMIT`: a larger declared body is left to fastify's route, which refuses it. */
  bodyLimit: number;
  /** Fastify's request handler (`app.routing`): everything the lane does not serve goes there. */
  fastify: (request: IncomingMessage, response: ServerResponse) => void;
  /** Fastify's logger: a refusal answered here logs the line fastify's error handler would. */
  log: FastifyBaseLogger;
  /** The MCP paths' own handler: every request on them is served there, none by fastify's routes. */
  mcp?: McpHandler;
}

const FORWARDED: ReadonlySet<string> = new Set(FORWARDED_METHODS);

/**
 * The server's request listener, in front of fastify. A request that fastify would forward is
 * decided and, if allowed, forwarded from here, with none of fastify's per-request objects: a
 * cached credential synchronously (no promise, no I/O), so the allow path costs what a bare
 * `node:http` proxy costs plus the lookups; a first use once its store read and argon2id
 * verify are done. A refusal of the decision is answered here as fastify's error handler would
 * answer it (`sendError`). MCP paths are served by their own handler (`mcp`), in the same
 * way. Everything else goes to fastify as it would without the lane: the
 * gateway's own endpoints, malformed or oversized requests, and — handed over with
 * the request id, answered by the one error handler — failures (store down, upstream failures).
 */
export function createFastLane(options: FastLaneOptions): { listener: (request: IncomingMessage, response: ServerResponse) => void; close: () => void } {
  const { routes, authorize, forward, bodyLimit, fastify, log, mcp } = options;
  let closing = false;

  function listener(request: IncomingMessage, response: ServerResponse): void {
    const checked = closing || isLingering(request.socket) ? undefined : checkedPathOf(request);
    if (checked !== undefined && mcp?.serves(checked) === true) {
      mcp.serve(request, response, requestIdOf(request), checked, answerRefusal);
      return;
    }
    const path = checked !== undefined && isForwarded(request, checked) ? checked : undefined;
    if (path === undefined) {
      fastify(request, response);
      return;
    }
    const requestId = requestIdOf(request);
    let authorization: Authorization;
    try {
      authorization = authorize(request, path);
    } catch (error) {
      answerRefusal(request, response, requestId, error);
      return;
    }
    // Nothing was sent yet: fastify answers it, as it answers every failure.
    const refuse = (error: Error) => {
      handOver(request, { requestId, error });
      fastify(request, response);
    };
    if (!(authorization instanceof Promise)) {
      forward(request, response, requestId, authorization, refuse);
      return;
    }
    // A first use (store read, argon2id) or an uncached admin token: forwarded from here once decided.
    const authorizedSince = performance.now();
    authorization.then((authorized) => {
      try {
        forward(request, response, requestId, authorized, refuse, undefined, undefined, authorizedSince);
      } catch (error) {
        refuse(error as Error);
      }
    }, (error: unknown) => answerRefusal(request, response, requestId, error));
  }

  /**
   * The decision's own refusals (401, 403, 404, 405, 429 …) are answered here, with the answer
   * and log line fastify's error handler gives: a flood of wrong keys then costs no fastify
   * request per attempt. Anything else (the store down, a bug) is handed over to fastify.
   */
  function answerRefusal(request: IncomingMessage, response: ServerResponse, requestId: string, error: unknown): void {
    if (error instanceof GatewayError && error.status < 500) {
      sendError(response, error, requestId, log);
      return;
    }
    handOver(request, { requestId, error: error as Error });
    fastify(request, response);
  }

  /**
   * The request target's path, once it and the headers are known to be read alike by every
   * parser after us; undefined for anything else, which keeps fastify's answer.
   */
  function checkedPathOf(request: IncomingMessage): string | undefined {
    try {
      const { path } = parseRequestTarget(request.url!);
      assertSingleHeaders(request.rawHeaders);
      return path;
    } catch {
      return undefined;
    }
  }

  /** Whether fastify's forwarding route would see and serve the request as it is. */
  function isForwarded(request: IncomingMessage, path: string): boolean {
    const method = request.method!;
    if (!FORWARDED.has(method)) return false;
    const declared = request.headers['content-length'];
    if (declared !== undefined && Number(declared) > bodyLimit) return false;
    return routes.isForwarded(method, path);
  }

  return {
    listener,
    /** From now on every request goes to fastify, which answers 503 while it drains. */
    close: () => {
      closing = true;
    },
  };
}
