import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { expect, vi } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { PROTOCOL_VERSION } from './mcp.ts';
import { closeWithSockets } from './origin.ts';

/**
 * An upstream that holds its answers open, for the "holding under abuse" tests:
 *  - a GET asking for `text/event-stream` (any path, MCP_PATH included), or any request with an
 *    `x-test-stream` header, is answered with an endless stream of JSON-RPC notifications, one
 *    every `x-test-every` ms (default 20), until the gateway closes it;
 *  - `POST …/events` is recorded and answered 200 at once;
 *  - `/hang/…` is never answered;
 *  - a WebSocket sends a message every 20 ms until it is closed.
 */
export interface StreamOrigin {
  url: string;
  /** Event streams and WebSockets open now. */
  open(): number;
  /** Bodies of the `…/events` POSTs received. */
  events: string[];
  /** Requests on `/hang/…` received. */
  hanging(): number;
  close(): Promise<void>;
}

export async function startStreamOrigin(): Promise<StreamOrigin> {
  let open = 0;
  let hanging = 0;
  const events: string[] = [];
  const held = new Set<ServerResponse>();
  const server: Server = createServer((request, response) => {
    const url = request.url ?? '';
    if (url.startsWith('/hang/')) {
      hanging++;
      held.add(response);
      response.on('close', () => held.delete(response));
      return;
    }
    // `x-test-stream`: an event stream the request did not ask for (any method, any Accept).
    if ((request.method === 'GET' && String(request.headers.accept).includes('text/event-stream')) || request.headers['x-test-stream'] !== undefined) {
      request.resume();
      stream(request, response);
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (url.endsWith('/events')) events.push(Buffer.concat(chunks).toString());
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });

  function stream(request: IncomingMessage, response: ServerResponse): void {
    open++;
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let sent = 0;
    const write = () => response.write(`data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: sent++ } })}\n\n`);
    write();
    const timer = setInterval(write, Number(request.headers['x-test-every'] ?? 20));
    response.on('close', () => {
      clearInterval(timer);
      open--;
    });
  }

  const sockets = new WebSocketServer({ server });
  sockets.on('connection', (socket) => {
    open++;
    const timer = setInterval(() => socket.send('tick'), 20);
    socket.on('close', () => {
      clearInterval(timer);
      open--;
    });
    socket.on('error', () => socket.terminate());
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    open: () => open,
    events,
    hanging: () => hanging,
    close: () => closeWithSockets(server, sockets),
  };
}

/** What a client holds of an open stream or tunnel. */
export interface HeldStream {
  /** Bytes (or WebSocket messages) received so far. */
  received(): number;
  /** The connection has ended (EOF, reset or closed) as the client sees it. */
  ended(): boolean;
  close(): void;
}

/** A refusal, or a stream held open once its first bytes arrived. */
export type StreamOutcome = { status: number; body: string; stream?: undefined } | { status: 200; body?: undefined; stream: HeldStream };

/** A GET asking for an event stream, on a connection of its own, resolved once the first bytes arrive. */
export function openEventStream(url: string, token: string, headers: Record<string, string> = {}): Promise<StreamOutcome> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    let ended = false;
    const end = () => (ended = true);
    const request = httpRequest(url, {
      agent: false,
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION, ...headers },
    });
    request.on('socket', (socket: Socket) => socket.once('end', end).once('error', end).once('close', end));
    request.on('error', (error) => {
      end();
      reject(error);
    });
    request.on('response', (response) => {
      response.on('error', end);
      if (response.statusCode !== 200) {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode!, body }));
        return;
      }
      response.once('data', () =>
        resolve({ status: 200, stream: { received: () => bytes, ended: () => ended, close: () => request.destroy() } }),
      );
      response.on('data', (chunk: Buffer) => (bytes += chunk.length));
    });
    request.end();
  });
}

/** A WebSocket through the gateway, resolved once its first message arrives. */
export function openTunnel(url: string, token: string): Promise<HeldStream> {
  return new Promise((resolve, reject) => {
    let messages = 0;
    let ended = false;
    const socket = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
    socket.once('unexpected-response', (_request, response) => reject(new Error(`upgrade refused: ${response.statusCode}`)));
    socket.on('error', () => (ended = true));
    socket.on('close', () => (ended = true));
    socket.once('message', () => resolve({ received: () => messages, ended: () => ended || socket.readyState !== WebSocket.OPEN, close: () => socket.terminate() }));
    socket.on('message', () => messages++);
  });
}

/**
 * An admin request, answered with its status and `snapshot()` as it was once every I/O event that
 * arrived with the answer was handled (`setImmediate`: the end of that poll phase), so that a
 * connection closed before the answer was sent counts as closed however the kernel ordered the two.
 */
export function adminRequest<T>(url: string, method: string, token: string, snapshot: () => T): Promise<{ status: number; seen: T }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method, agent: false, headers: { authorization: `Bearer ${token}` } });
    request.on('error', reject);
    request.on('response', (response) => {
      setImmediate(() => resolve({ status: response.statusCode!, seen: snapshot() }));
      response.resume();
    });
    request.end();
  });
}

/**
 * Revokes a key with `DELETE url` and asserts what "a credential that ends while its
 * connection is open" promises of `streams`: each had ended as the client saw it when the 204
 * arrived, the upstream's side closes too, and none received a byte after the 204.
 */
export async function expectCutByDelete(url: string, admin: string, streams: readonly HeldStream[], origin: StreamOrigin): Promise<void> {
  const deleted = await adminRequest(url, 'DELETE', admin, () => streams.map((stream) => ({ ended: stream.ended(), received: stream.received() })));
  expect(deleted.status).toBe(204);
  expect(deleted.seen.map((stream) => stream.ended)).toEqual(streams.map(() => true));
  await vi.waitFor(() => expect(origin.open()).toBe(0));
  expect(streams.map((stream) => stream.received())).toEqual(deleted.seen.map((stream) => stream.received));
}
