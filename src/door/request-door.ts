import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { isReservedPath } from '../config/reserved-paths.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { sendError } from '../http/error-handler.ts';
import { isLingering } from '../http/lingering-close.ts';
import { setRateLimitHeaders } from '../http/rate-limit-headers.ts';
import type { RefusalSubject } from '../http/refusal-log.ts';
import { requestIdOf } from '../http/request-id.ts';
import type { McpHandler } from '../mcp/mcp-handler.ts';
import { errorOf } from '../policy/denial.ts';
import type { Authorization, RequestPipeline, Verdict } from '../pipeline/request-pipeline.ts';
import { tooLarge, type Forwarder } from '../proxy/forward.ts';
import { assertSingleHeaders } from '../proxy/raw-headers.ts';
import { parseRequestTarget } from '../proxy/request-target.ts';
import type { OwnEndpoints } from './own-endpoints.ts';

export interface RequestDoorDeps {
  /** The paths fastify serves itself (login, key management, audit, OpenAPI, `/docs`). */
  ownEndpoints: Pick<OwnEndpoints, 'serves'>;
  /** Fastify's request handler (`app.routing`): the gateway's own endpoints, and every answer while it drains. */
  fastify: (request: IncomingMessage, response: ServerResponse) => void;
  pipeline: Pick<RequestPipeline, 'authorize' | 'observe'>;
  forwarder: Pick<Forwarder, 'forward'>;
  /** The MCP paths' handler: every request on them is decided and relayed there. */
  mcp: Pick<McpHandler, 'serves' | 'serve' | 'upgradeRefusal'>;
  /** `BODY_LIMIT`: a larger declared body is refused before it is read. */
  bodyLimit: number;
  /** Where each answered refusal or failure is logged, once. */
  log: FastifyBaseLogger;
}

/**
 * The one door (docs/architecture.md, "One door"): the public server's request and upgrade
 * listener, on every address it listens on. Every request that is not for one of the
 * gateway's own endpoints or reserved paths (`config/reserved-paths.ts`) is decided here, by the one
 * pipeline, and forwarded from here — MCP paths by their handler, everything else by the
 * forwarder, WebSocket upgrades tunnelled.
 * Fastify serves only the gateway's own endpoints and forwards nothing. A refusal and a failure
 * (the store down, an upstream error, a bug) are answered by the same renderer and logged once.
 */
export class RequestDoor {
  readonly #deps: RequestDoorDeps;
  #closing = false;

  constructor(deps: RequestDoorDeps) {
    this.#deps = deps;
  }

  /** For `http.createServer`. */
  readonly listener = (request: IncomingMessage, response: ServerResponse): void => {
    this.#serve(request, response, undefined);
  };

  /** For the server's `upgrade` event: the same door, the socket answered through a response of its own. */
  readonly upgrade = (request: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const response = new ServerResponse(request);
    response.assignSocket(socket as ConstructorParameters<typeof ServerResponse>[0]['socket'] & object);
    // Whatever is answered here ends the connection: say so.
    response.shouldKeepAlive = false;
    // A refusal is the last thing said on this connection.
    response.on('finish', () => socket.destroy());
    socket.on('error', () => socket.destroy());
    this.#serve(request, response, head);
  };

  /** From now on every request goes to fastify, which answers 503 while it drains. */
  close(): void {
    this.#closing = true;
  }

  #serve(request: IncomingMessage, response: ServerResponse, head: Buffer | undefined): void {
    if (isLingering(request.socket)) {
      // Bytes a client sent after its connection was closed: never served, never forwarded.
      request.socket.destroy();
      return;
    }
    const { fastify, ownEndpoints, mcp, pipeline } = this.#deps;
    // A reserved path however spelt (`/API/v1/api-keys/29/`, `%2f`, dot segments) is the gateway's too:
    // fastify answers what it names exactly, else 404 or 405, and nothing of it is forwarded.
    if (this.#closing || ownEndpoints.serves(request.url!) || isReservedPath(request.url!)) {
      fastify(request, response);
      return;
    }
    const requestId = requestIdOf(request);
    let path: string;
    try {
      path = parseRequestTarget(request.url!).path;
      assertSingleHeaders(request.rawHeaders);
    } catch (error) {
      // A target or headers read two ways: refused before any route is known, counted with the decisions.
      pipeline.observe(request, undefined, { allowed: false, code: (error as GatewayError).code }, performance.now());
      this.#answer(response, requestId, error);
      return;
    }
    if (mcp.serves(path)) {
      if (head === undefined) mcp.serve(request, response, requestId, path);
      else this.#answer(response, requestId, errorOf(mcp.upgradeRefusal()));
      return;
    }
    if (head !== undefined && !isWebSocketUpgrade(request)) {
      // Refused before any decision: a first use would otherwise pay its argon2id verify for nothing.
      this.#answer(response, requestId, new GatewayError('bad_request', 'Only WebSocket upgrades are forwarded'));
      return;
    }
    const declared = request.headers['content-length'];
    if (declared !== undefined && Number(declared) > this.#deps.bodyLimit) {
      // Answered before the body is read; closing (lingering) bounds what is still read of it.
      response.setHeader('connection', 'close');
      this.#answer(response, requestId, tooLarge(this.#deps.bodyLimit));
      return;
    }
    let authorization: Authorization;
    try {
      authorization = pipeline.authorize(request, path);
    } catch (error) {
      this.#answer(response, requestId, error);
      return;
    }
    if (!(authorization instanceof Promise)) {
      this.#forward(request, response, requestId, authorization, head);
      return;
    }
    // A first use (store read, argon2id) or an uncached admin token: forwarded from here once decided.
    const authorizedSince = performance.now();
    authorization.then(
      (verdict) => this.#forward(request, response, requestId, verdict, head, authorizedSince),
      (error: unknown) => this.#answer(response, requestId, error),
    );
  }

  #forward(request: IncomingMessage, response: ServerResponse, requestId: string, verdict: Verdict, head: Buffer | undefined, authorizedSince?: number): void {
    // Every answer to a limited key carries its limits: a refusal here, a failure to forward (502, 504), the upstream's answer (the forwarder).
    if (!verdict.allow) {
      setRateLimitHeaders(response, verdict.quotas);
      this.#answer(response, requestId, errorOf(verdict), verdict);
      return;
    }
    const quotas = verdict.quotas;
    const fail = (error: Error) => {
      setRateLimitHeaders(response, quotas);
      this.#answer(response, requestId, error);
    };
    try {
      this.#deps.forwarder.forward(request, response, requestId, verdict, fail, head, authorizedSince);
    } catch (error) {
      fail(error as Error);
    }
  }

  /** The renderer of every refusal and failure on the door: problem+json, logged once (even when the client has left). */
  #answer(response: ServerResponse, requestId: string, error: unknown, subject?: RefusalSubject): void {
    sendError(response, error, requestId, this.#deps.log, subject);
  }
}

/** A WebSocket opening handshake (RFC 6455 §4.1): a GET asking to upgrade to `websocket`. */
function isWebSocketUpgrade(request: IncomingMessage): boolean {
  return request.method === 'GET' && String(request.headers.upgrade).toLowerCase() === 'websocket';
}
