import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { until } from '../support/until.ts';

/**
 * Clients that open connections and never finish them (slowloris, a declared body that never
 * comes, a trickled body, an upload that stalls) are cut at HEADERS_TIMEOUT / REQUEST_TIMEOUT
 * with a 408 where one can still be sent, while real requests are served; idle keep-alive
 * connections close after KEEP_ALIVE_TIMEOUT; past MAX_CONNECTIONS new connections are closed
 * at once and counted, and the ops port keeps answering.
 */

/** What one raw connection saw: the bytes the gateway sent, and its close. */
interface Watched {
  socket: Socket;
  data: string;
  closed: Promise<void>;
}

function watch(port: number, first: string): Promise<Watched> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const watched: Watched = { socket, data: '', closed: undefined as unknown as Promise<void> };
    watched.closed = new Promise((done) => socket.once('close', () => done()));
    socket.on('data', (chunk: Buffer) => (watched.data += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.once('connect', () => {
      socket.write(first);
      resolve(watched);
    });
    socket.once('error', reject);
  });
}

/** An upstream that records whether each request's body arrived whole or was aborted. */
async function startRecordingOrigin(): Promise<{ url: string; outcomes: Array<{ url: string; outcome: 'complete' | 'aborted' }>; close(): Promise<void> }> {
  const outcomes: Array<{ url: string; outcome: 'complete' | 'aborted' }> = [];
  const server: Server = createServer((req, res) => {
    let ended = false;
    req.on('data', () => {});
    req.on('end', () => {
      ended = true;
      outcomes.push({ url: req.url ?? '', outcome: 'complete' });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
    req.on('close', () => {
      if (!ended) outcomes.push({ url: req.url ?? '', outcome: 'aborted' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    outcomes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const metric = async (gateway: GatewayProcess, name: string) => {
  const text = await (await fetch(`${gateway.opsUrl}/metrics`)).text();
  const line = text.split('\n').find((entry) => entry.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};

describe('requests that never finish', () => {
  let origin: Awaited<ReturnType<typeof startRecordingOrigin>>;
  let gateway: GatewayProcess;
  let port: number;
  let eventsKey: string;
  let mcpKey: string;

  beforeAll(async () => {
    origin = await startRecordingOrigin();
    gateway = await startGateway({
      UPSTREAM_URL: origin.url,
      HEADERS_TIMEOUT: '1s',
      REQUEST_TIMEOUT: '2s',
      KEEP_ALIVE_TIMEOUT: '1s',
    });
    port = Number(new URL(gateway.url).port);
    const admin = await loginAdmin(gateway.url);
    eventsKey = (await createKey(gateway.url, admin, { name: 'events', scopes: ['events:write'] })).body.key;
    mcpKey = (await createKey(gateway.url, admin, { name: 'mcp', scopes: ['mcp:agents'] })).body.key;
  });
  afterAll(async () => {
    await gateway?.stop();
    await origin?.close();
  });

  it('closes hundreds of unfinished requests in time, with 408 where it can, while a real request is served', async () => {
    const partialHeaders = Array.from({ length: 100 }, () => watch(port, 'POST /api/v1/auth/login HTTP/1.1\r\nHost: gatehouse\r\n'));
    const missingBody = Array.from({ length: 100 }, () =>
      watch(port, 'POST /api/v1/auth/login HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n'),
    );
    const trickled = await Promise.all(
      Array.from({ length: 30 }, () =>
        watch(
          port,
          `POST /mcp HTTP/1.1\r\nHost: gatehouse\r\nAuthorization: Bearer ${mcpKey}\r\nContent-Type: application/json\r\n` +
            'Accept: application/json, text/event-stream\r\nContent-Length: 500\r\n\r\n{',
        ),
      ),
    );
    // One byte every 200 ms: never idle, never finished.
    const trickle = setInterval(() => {
      for (const each of trickled) if (!each.socket.destroyed) each.socket.write(' ');
    }, 200);
    const held = [...(await Promise.all([...partialHeaders, ...missingBody])), ...trickled];

    const served = await request(`${gateway.url}/api/v1/agents/7/events`, { method: 'POST', token: eventsKey, json: { type: 'ping' } });
    expect(served.status).toBe(200);
    expect(origin.outcomes).toContainEqual({ url: '/api/v1/agents/7/events', outcome: 'complete' });
    expect((await fetch(`${gateway.opsUrl}/readyz`)).status).toBe(200);

    // Each closed by the gateway (one that never closes fails the test's own timeout), and by its
    // deadline: the 408 request_timeout says so. How soon after the deadline: bench/attacks.ts, "slow-clients".
    await Promise.all(held.map((each) => each.closed));
    clearInterval(trickle);
    for (const each of held) {
      expect(each.data).toMatch(/^HTTP\/1\.1 408 /);
      expect(each.data).toContain('"code":"request_timeout"');
    }
    // Nothing of the trickled MCP messages reached the upstream.
    expect(origin.outcomes.filter((entry) => entry.url.startsWith('/mcp'))).toEqual([]);
  });

  it('cuts a forwarded upload that stalls, and the upstream sees it aborted', async () => {
    const upload = await watch(
      port,
      `POST /api/v1/agents/9/events HTTP/1.1\r\nHost: gatehouse\r\nAuthorization: Bearer ${eventsKey}\r\n` +
        'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n',
    );
    await upload.closed;
    expect(upload.data).toMatch(/^HTTP\/1\.1 408 /);
    await until(() => origin.outcomes.some((entry) => entry.url === '/api/v1/agents/9/events'), 'the upstream to see the upload end');
    expect(origin.outcomes.filter((entry) => entry.url === '/api/v1/agents/9/events')).toEqual([{ url: '/api/v1/agents/9/events', outcome: 'aborted' }]);
  });

  it('closes an idle keep-alive connection after KEEP_ALIVE_TIMEOUT', async () => {
    const idle = await watch(port, `GET /api/v1/api-keys HTTP/1.1\r\nHost: gatehouse\r\n\r\n`);
    await idle.closed;
    // Kept alive after the answer (not closed with it), for KEEP_ALIVE_TIMEOUT as the answer announces, then closed.
    expect(idle.data).toMatch(/^HTTP\/1\.1 401 /);
    expect(idle.data.toLowerCase()).toContain('keep-alive: timeout=1\r\n');
    expect(idle.data.toLowerCase()).not.toContain('connection: close');
  });
});

describe('more connections than MAX_CONNECTIONS', () => {
  let gateway: GatewayProcess;
  let port: number;

  beforeAll(async () => {
    gateway = await startGateway({ MAX_CONNECTIONS: '50', HEADERS_TIMEOUT: '60s', REQUEST_TIMEOUT: '60s' });
    port = Number(new URL(gateway.url).port);
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('closes new connections at once past the limit, counts them, keeps the ops port answering, and serves again once some close', async () => {
    const held = await Promise.all(Array.from({ length: 50 }, () => watch(port, 'GET /api/v1/api-keys HTTP/1.1\r\nHost: gatehouse\r\n')));
    await until(async () => (await metric(gateway, 'gatehouse_open_connections')) === 50, '50 open connections');

    const extra = await Promise.all(Array.from({ length: 20 }, () => watch(port, 'GET /api/v1/api-keys HTTP/1.1\r\nHost: gatehouse\r\n\r\n')));
    // Closed without a byte (HEADERS_TIMEOUT is a minute here: only the limit closes them), and counted.
    await Promise.all(extra.map((each) => each.closed));
    for (const each of extra) expect(each.data).toBe('');
    expect(await metric(gateway, 'gatehouse_connections_dropped_total')).toBe(20);
    expect((await fetch(`${gateway.opsUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${gateway.opsUrl}/readyz`)).status).toBe(200);

    for (const each of held.slice(0, 10)) each.socket.destroy();
    await until(async () => (await metric(gateway, 'gatehouse_open_connections')) === 40, 'the closed connections to be gone');
    const response = await request(`${gateway.url}/api/v1/api-keys`);
    expect(response.status).toBe(401);
    expect(response.body).toMatchObject({ code: 'missing_credential' });
    for (const each of held) each.socket.destroy();
  });
});
