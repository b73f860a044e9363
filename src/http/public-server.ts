import { lookup } from 'node:dns/promises';
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { clientErrorHandler } from './client-error.ts';
import { installLingeringClose } from './lingering-close.ts';

/** What a client may hold on the public listener (docs/security.md, "Holding under abuse"). */
export interface ConnectionLimits {
  /** `HEADERS_TIMEOUT`: the request's header section must arrive within this. */
  headersTimeoutMs: number;
  /** `REQUEST_TIMEOUT`: the whole request, headers and body, must arrive within this. */
  requestTimeoutMs: number;
  /** `KEEP_ALIVE_TIMEOUT`: an idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** `MAX_CONNECTIONS`: connections open at once, on every address together; more are closed as they are accepted. */
  maxConnections: number;
  /** How long a closing connection's late request bytes are read and dropped so its last answer arrives. */
  lingerMs: number;
}

/** The one door every request and upgrade of every public server goes to. */
export interface Door {
  listener: RequestListener;
  upgrade: (request: IncomingMessage, socket: Duplex, head: Buffer) => void;
}

/** Resolves a host name to every address it names (`dns.lookup` with `all`). */
export type Resolve = (host: string) => Promise<string[]>;

/**
 * The public HTTP servers: the one fastify listens with (made by `factory`, fastify's
 * `serverFactory`) and one more for each further address `localhost` resolves to, all with
 * the same bounds and all sending every request and upgrade to the one door (docs/architecture.md,
 * "One door"). Fastify binds one address only when given a server factory, so the others are
 * bound here, as fastify would have without one.
 *
 * The bounds on slow and idle clients are Node's own: a header section or a request that does
 * not arrive in time is answered 408 (by the client-error handler) and its connection closed.
 * Node checks these deadlines every `connectionsCheckingInterval`, 30 s by default: far too
 * coarse for a 10 s bound, so it is derived from the shortest deadline (at most 1 s).
 */
export class PublicServers {
  readonly #limits: ConnectionLimits;
  readonly #observe: { dropped(): void };
  readonly #servers: Server[] = [];
  #door: Door | undefined;
  /** Client connections open on all the servers together: `MAX_CONNECTIONS` bounds their sum. */
  #open = 0;
  #furtherDrained: Promise<void> = Promise.resolve();
  #fastify: RequestListener | undefined;

  constructor(limits: ConnectionLimits, observe: { dropped(): void }) {
    this.#limits = limits;
    this.#observe = observe;
  }

  /** For fastify's `serverFactory`: until `route` is called (while `build()` runs), requests go to fastify. */
  readonly factory = (fastifyHandler: RequestListener): Server => {
    this.#fastify ??= fastifyHandler;
    return this.#create();
  };

  /** From now on every request and upgrade, on every server, goes through `door`. */
  route(door: Door): void {
    this.#door = door;
  }

  /** Listens on every further address `host` names besides `primary` (only `localhost`, as fastify does). */
  async listenFurther(host: string, port: number, primary: string, resolve: Resolve = resolveAll): Promise<void> {
    if (host !== 'localhost') return;
    for (const address of await resolve(host)) {
      if (address === primary) continue;
      const server = this.#create();
      // An address that cannot be bound (no IPv6 here) is skipped, as fastify skips it.
      await new Promise<void>((done) => {
        server.once('error', () => done());
        server.listen({ port, host: address }, () => done());
      });
    }
  }

  /** Every server made: the first is fastify's. */
  get servers(): readonly Server[] {
    return this.#servers;
  }

  /** Open connections across every server. */
  async connections(): Promise<number> {
    const counts = await Promise.all(this.#servers.map((server) => new Promise<number>((resolve, reject) => server.getConnections((error, count) => (error ? reject(error) : resolve(count))))));
    return counts.reduce((sum, count) => sum + count, 0);
  }

  /**
   * Stops the further servers accepting, as fastify stops its own at close, idle connections
   * closed; `furtherDrained` resolves once their last connection has ended.
   */
  stopFurther(): void {
    const closing = this.#servers.slice(1).filter((server) => server.listening).map(
      (server) =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        }),
    );
    this.#furtherDrained = Promise.all(closing).then(() => {});
  }

  furtherDrained(): Promise<void> {
    return this.#furtherDrained;
  }

  closeAllConnections(): void {
    for (const server of this.#servers) server.closeAllConnections();
  }

  #create(): Server {
    const limits = this.#limits;
    const server = createServer(
      {
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        connectionsCheckingInterval: checkingIntervalMs(limits),
      },
      (request, response) => (this.#door?.listener ?? this.#fastify!)(request, response),
    );
    server.maxConnections = limits.maxConnections;
    // Node closes a connection past maxConnections as soon as it is accepted, and says so here.
    server.on('drop', () => this.#observe.dropped());
    // Node counts each server's connections alone; with several addresses the bound is on their sum.
    server.on('connection', (socket: Duplex) => {
      if (this.#open >= limits.maxConnections) {
        socket.destroy();
        this.#observe.dropped();
        return;
      }
      this.#open++;
      socket.once('close', () => this.#open--);
    });
    // Fastify answers its own server's parse errors (its `clientErrorHandler` option); the further servers', this.
    if (this.#servers.length > 0) server.on('clientError', clientErrorHandler);
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (this.#door === undefined) socket.destroy();
      else this.#door.upgrade(request, socket, head);
    });
    installLingeringClose(server, limits.lingerMs);
    this.#servers.push(server);
    return server;
  }
}

async function resolveAll(host: string): Promise<string[]> {
  return (await lookup(host, { all: true })).map((entry) => entry.address);
}

function checkingIntervalMs(limits: ConnectionLimits): number {
  return Math.max(100, Math.min(1_000, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 4)));
}
