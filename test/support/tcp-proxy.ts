import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './gateway-process.ts';

/**
 * A TCP relay on a free port to `target`, that a test can cut (every connection dropped,
 * new ones refused, as when a database server goes away) and restore on the same port.
 */
export interface TcpProxy {
  port: number;
  /** Drops every connection and stops listening. */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  /** Accepts new connections but relays nothing until `release()`, as a database server that hangs. */
  hold(): void;
  /** Relays the held connections and every new one again. */
  release(): void;
  /** Holds every byte from the target this long before passing it on, in order (0: at once): a server that answers late. */
  delayReplies(ms: number): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let held: Socket[] | undefined;
  let replyDelayMs = 0;

  const relay = (client: Socket) => {
    const upstream = createConnection(target);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    // Each chunk waits for those before it, so a delay changed midway never reorders bytes.
    let tail = Promise.resolve();
    upstream.on('data', (chunk: Buffer) => {
      const due = performance.now() + replyDelayMs;
      tail = tail
        .then(() => new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now()))))
        .then(() => {
          if (!client.destroyed) client.write(chunk);
        });
    });
    upstream.on('end', () => void tail.then(() => client.end()));
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const next = createServer((client) => {
        if (held === undefined) return relay(client);
        // Paused, what the client sends waits in its socket until the relay pipes it.
        client.pause();
        sockets.add(client);
        client.on('close', () => sockets.delete(client));
        client.on('error', () => client.destroy());
        held.push(client);
      });
      next.once('error', reject);
      next.listen(port, '127.0.0.1', () => {
        server = next;
        resolve();
      });
    });

  const cut = async () => {
    const current = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (current !== undefined) await new Promise<void>((resolve) => current.close(() => resolve()));
  };

  await listen();
  const hold = () => {
    held ??= [];
  };
  const release = () => {
    const waiting = held ?? [];
    held = undefined;
    for (const client of waiting) if (!client.destroyed) relay(client);
  };

  return {
    port,
    cut,
    restore: () => (server === undefined ? listen() : Promise.resolve()),
    hold,
    release,
    delayReplies: (ms) => void (replyDelayMs = ms),
    close: cut,
  };
}
