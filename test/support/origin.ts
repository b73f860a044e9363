import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  /** `performance.now()` when the request's body had arrived. */
  arrivedAt: number;
}

export interface Origin {
  url: string;
  port: number;
  received: ReceivedRequest[];
  /** Requests received whose URL path starts with `path`. */
  receivedAt(path: string): ReceivedRequest[];
  clear(): void;
  close(): Promise<void>;
}

/**
 * A real upstream on port 0 that records everything it receives, for asserting what the
 * gateway forwarded (and that refused requests never arrived). Special paths:
 *  - `/sse/…`      answers a text/event-stream of three events, 100 ms apart;
 *  - `/slow/…`     waits 3 s before answering (for upstream timeouts);
 *  - a WebSocket upgrade on any path is recorded (body `websocket`) and echoes every message;
 *  - anything else answers 200 `{"ok": true, "path": …}`.
 */
export async function startOrigin(): Promise<Origin> {
  const received: ReceivedRequest[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const url = request.url ?? '';
      received.push({
        method: request.method ?? '',
        url,
        headers: request.headers,
        rawHeaders: request.rawHeaders,
        body: Buffer.concat(chunks).toString(),
        arrivedAt: performance.now(),
      });
      if (url.startsWith('/sse/')) {
        response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        let sent = 0;
        const timer = setInterval(() => {
          response.write(`data: event ${sent}\n\n`);
          if (++sent === 3) {
            clearInterval(timer);
            response.end();
          }
        }, 100);
        return;
      }
      if (url.startsWith('/slow/')) {
        setTimeout(() => response.writeHead(200, { 'content-type': 'application/json' }).end('{"slow":true}'), 3000).unref();
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json', 'x-origin': 'yes' });
      response.end(JSON.stringify({ ok: true, path: url }));
    });
  });
  const sockets = new WebSocketServer({ server });
  sockets.on('connection', (socket, request) => {
    received.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, rawHeaders: request.rawHeaders, body: 'websocket', arrivedAt: performance.now() });
    socket.on('message', (data, binary) => socket.send(binary ? data : `echo: ${String(data)}`));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    receivedAt: (path) => received.filter((request) => request.url.startsWith(path)),
    clear: () => void received.splice(0),
    close: () => closeWithSockets(server, sockets),
  };
}

/**
 * A barrier for "nothing was forwarded": one request that `token` may send through the gateway
 * at `gatewayUrl` to `path`, answered 200 before this resolves. The origin records requests in
 * the order they arrive, and anything the gateway forwarded before it would have arrived first:
 * resolves with what the origin received before the barrier's request (not the barrier itself).
 */
export async function receivedBeforeBarrier(origin: Origin, gatewayUrl: string, token: string, path = '/api/v1/agents/1/events'): Promise<ReceivedRequest[]> {
  const marker = randomUUID();
  const response = await fetch(`${gatewayUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ barrier: marker }),
  });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`the barrier request was answered ${response.status}`);
  const at = origin.received.findIndex((request) => request.body.includes(marker));
  if (at === -1) throw new Error('the barrier request was answered but never reached the origin');
  return origin.received.slice(0, at);
}

/** Ends a test server at once: its WebSockets, its open connections, then the listener. */
export function closeWithSockets(server: Server, sockets: WebSocketServer): Promise<void> {
  return new Promise<void>((resolve) => {
    for (const socket of sockets.clients) socket.terminate();
    sockets.close();
    server.closeAllConnections();
    server.close(() => resolve());
  });
}
