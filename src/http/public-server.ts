import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';

/** What a client may hold on the public listener (docs/security.md, "Holding under abuse"). */
export interface ConnectionLimits {
  /** `HEADERS_TIMEOUT`: the request's header section must arrive within this. */
  headersTimeoutMs: number;
  /** `REQUEST_TIMEOUT`: the whole request, headers and body, must arrive within this. */
  requestTimeoutMs: number;
  /** `KEEP_ALIVE_TIMEOUT`: an idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** `MAX_CONNECTIONS`: connections open at once; more are closed as they are accepted. */
  maxConnections: number;
}

export interface PublicServer {
  /** For fastify's `serverFactory`: the server, its requests sent to fastify until `route` says otherwise. */
  factory: (fastifyHandler: RequestListener) => Server;
  /** From now on every request goes to `listener` (the gateway's one request listener). */
  route(listener: RequestListener): void;
}

/**
 * The public HTTP server with Node's own bounds on slow and idle clients: a header section
 * or a request that does not arrive in time is answered 408 (by the client-error handler) and
 * its connection closed, so a client that opens connections and never finishes them cannot
 * hold the gateway's file descriptors. Node checks these deadlines every
 * `connectionsCheckingInterval`, 30 s by default: far too coarse for a 10 s bound, so it is
 * derived from the shortest deadline (at most 1 s, the cost a pass over the open connections).
 */
export function publicServer(limits: ConnectionLimits, observe: { dropped(): void }): PublicServer {
  let listener: RequestListener | undefined;
  const dispatch = (request: IncomingMessage, response: ServerResponse) => listener!(request, response);
  return {
    factory(fastifyHandler) {
      listener ??= fastifyHandler;
      const server = createServer(
        {
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          connectionsCheckingInterval: checkingIntervalMs(limits),
        },
        dispatch,
      );
      server.maxConnections = limits.maxConnections;
      // Node closes a connection past maxConnections as soon as it is accepted, and says so here.
      server.on('drop', () => observe.dropped());
      return server;
    },
    route(next) {
      listener = next;
    },
  };
}

function checkingIntervalMs(limits: ConnectionLimits): number {
  return Math.max(100, Math.min(1_000, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 4)));
}
