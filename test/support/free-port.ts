import { createServer } from 'node:net';

/**
 * Ports this process has handed out. The kernel may give the port it just released to the next
 * `listen(0)`, so two calls in a row can return the same number (PORT and OPS_PORT once came out
 * equal and the gateway refused to start); a port is never handed out twice by one process.
 */
const handedOut = new Set<number>();

/** A loopback port no one listens on now and that this process has not handed out before. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await unusedPort();
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
}

function unusedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
