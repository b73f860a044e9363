import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { GatewayError } from '../../../src/errors/gateway-error.ts';
import { Upstream, type UpstreamStatus } from '../../../src/proxy/upstream.ts';

const TIMEOUT_MS = 300;

async function listen(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A GET through the front server; resolves with its status, or 0 when the connection ends without one. */
function get(url: string, onRequest?: (destroy: () => void) => void): Promise<number> {
  return new Promise((resolve) => {
    const outgoing = httpRequest(url, { agent: false }, (response) => {
      response.resume();
      resolve(response.statusCode!);
    });
    outgoing.on('error', () => resolve(0));
    outgoing.end();
    onRequest?.(() => outgoing.destroy());
  });
}

async function closeAll(upstream: Upstream | undefined, servers: Server[]): Promise<void> {
  await upstream?.close();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

describe('Upstream: a client that leaves while its request waits for a connection', () => {
  const servers: Server[] = [];
  let upstream: Upstream | undefined;
  afterEach(() => closeAll(upstream, servers));

  it('is neither answered nor counted as an upstream timeout when its wait would have run out', async () => {
    // Behind a pool of one connection, an upstream whose first answer never ends: every other request queues.
    const atOrigin = new Set<string>();
    const origin = await listen((request, response) => {
      atOrigin.add(request.url!);
      response.writeHead(200).write('never ends');
    });
    const observed: Array<[string, UpstreamStatus]> = [];
    const refused: string[] = [];
    const relayed = new Set<string>();
    upstream = new Upstream({ url: origin.url, timeoutMs: TIMEOUT_MS, connections: 1, observed: (route, status) => observed.push([route, status]) });
    const front = await listen((request, response) => {
      const name = request.url!.slice(1);
      upstream!.relay(response, name, { method: 'GET', path: request.url!, headers: [], body: null, route: name }, (error: GatewayError) => {
        refused.push(name);
        response.writeHead(504).end(error.code);
      });
      relayed.add(name);
    });
    servers.push(origin.server, front.server);

    expect(await get(`${front.url}/busy`)).toBe(200);
    let leave = () => {};
    const left = get(`${front.url}/left`, (destroy) => (leave = destroy));
    await vi.waitFor(() => expect(relayed.has('left')).toBe(true));
    leave();
    expect(await left).toBe(0);
    // Queued after the one that left, so its 504 comes after that one's wait would have run out.
    expect(await get(`${front.url}/later`)).toBe(504);

    expect(refused).toEqual(['later']);
    expect(observed).toEqual([['later', 'timeout']]);
    expect([...atOrigin]).toEqual(['/busy']);
  });
});

describe('Upstream: an answer taken over whole', () => {
  const servers: Server[] = [];
  let upstream: Upstream | undefined;
  afterEach(() => closeAll(upstream, servers));

  it('hands the body over in one piece, or a 502 past maxBytes with the upstream request aborted', async () => {
    let originSawAbort = false;
    const origin = await listen((request, response) => {
      response.on('close', () => {
        if (!response.writableFinished) originSawAbort = true;
      });
      if (request.url === '/small') response.writeHead(200, { 'content-type': 'application/json' }).end('{"a":1}');
      // A large answer, written in pieces and never ended by itself.
      else {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.write('x'.repeat(600));
        response.write('x'.repeat(600));
      }
    });
    const observed: UpstreamStatus[] = [];
    upstream = new Upstream({ url: origin.url, timeoutMs: 5_000, observed: (_route, status) => observed.push(status) });
    const got: Array<string | { status: number; body: string }> = [];
    const front = await listen((request, response) => {
      upstream!.relay(
        response,
        'id',
        { method: 'GET', path: request.url!, headers: [], body: null, route: 'r' },
        () => response.writeHead(599).end(),
        () => ({
          maxBytes: 1_000,
          whole: (answer) => {
            if ('code' in answer) got.push(answer.code);
            else got.push({ status: answer.statusCode, body: answer.body.toString() });
            response.writeHead(200).end();
          },
        }),
      );
    });
    servers.push(origin.server, front.server);

    expect(await get(`${front.url}/small`)).toBe(200);
    expect(await get(`${front.url}/large`)).toBe(200);
    expect(got).toEqual([{ status: 200, body: '{"a":1}' }, 'upstream_unavailable']);
    await vi.waitFor(() => expect(originSawAbort).toBe(true));
    expect(observed).toEqual([200, 'error']);
  });
});
