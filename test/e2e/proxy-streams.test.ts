import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { PROTOCOL_VERSION } from '../support/mcp.ts';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { expectCutByDelete, openEventStream, openTunnel, startStreamOrigin, type HeldStream, type StreamOrigin } from '../support/stream-origin.ts';

// "Holding under abuse": one key holding the upstream, and a credential that ends while its
// stream is open. Real processes: a spawned gateway in front of an upstream that never ends
// its streams (test/support/stream-origin.ts). Credentials that expire while their streams are
// open need a clock the test moves: test/integration/credential-expiry.test.ts.

const MAX_STREAMS = 4;
/** The gateway's ordinary upstream connections (src/proxy/upstream.ts DEFAULT_UPSTREAM_CONNECTIONS). */
const ORDINARY_CONNECTIONS = 128;
const EVENTS_PATH = '/api/v1/agents/1/events';

describe('one key holding the upstream, and credentials that end while their streams are open', () => {
  let origin: StreamOrigin;
  let gateway: GatewayProcess;
  let admin: string;
  let mcpUrl: string;
  const held: HeldStream[] = [];

  const key = async (scopes: string[], extra: Record<string, unknown> = {}) => {
    const response = await createKey(gateway.url, admin, { name: 'streams', scopes, ...extra });
    if (response.status !== 201) throw new Error(`create failed: ${response.status} ${response.text}`);
    return { key: response.body.key as string, id: response.body.id as number };
  };
  const hold = async (token: string, url = mcpUrl, headers: Record<string, string> = {}) => {
    const outcome = await openEventStream(url, token, headers);
    if (outcome.stream === undefined) throw new Error(`stream refused: ${outcome.status} ${outcome.body}`);
    held.push(outcome.stream);
    return outcome.stream;
  };

  beforeAll(async () => {
    origin = await startStreamOrigin();
    gateway = await startGateway({ UPSTREAM_URL: origin.url, MAX_STREAMS_PER_KEY: String(MAX_STREAMS), UPSTREAM_TIMEOUT: '1s', LOG_LEVEL: 'warn' });
    admin = await loginAdmin(gateway.url);
    mcpUrl = `${gateway.url}/mcp`;
  }, 60_000);
  afterEach(async () => {
    for (const stream of held.splice(0)) stream.close();
    await vi.waitFor(() => expect(origin.open()).toBe(0), { timeout: 10_000 });
  });
  afterAll(async () => {
    await gateway?.stop();
    await origin?.close();
  });

  it(`a key holds at most ${MAX_STREAMS} MCP streams (429 too_many_streams), while another key's events are served at once`, async () => {
    const greedy = await key(['mcp:agents']);
    const streams = [];
    for (let i = 0; i < MAX_STREAMS; i++) streams.push(await hold(greedy.key));

    const refused = await openEventStream(mcpUrl, greedy.key);
    expect(refused.status).toBe(429);
    const answer = JSON.parse(refused.body!);
    expect(answer).toMatchObject({ jsonrpc: '2.0', error: { data: { code: 'too_many_streams', status: 429 } } });

    // Served, not queued: a request queued behind streams that never end is 504 at UPSTREAM_TIMEOUT.
    const other = await key(['events:write']);
    const posted = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: other.key, json: { type: 'served' } });
    expect(posted.status).toBe(200);
    expect(origin.events).toContain('{"type":"served"}');

    // A stream that ends frees its place.
    streams[0]!.close();
    await vi.waitFor(async () => {
      const again = await openEventStream(mcpUrl, greedy.key);
      if (again.stream !== undefined) held.push(again.stream);
      expect(again.status).toBe(200);
    });
  });

  it('streams beyond the ordinary connections (many keys, each at its cap) never delay an ordinary request', async () => {
    const keys = [];
    const needed = Math.ceil((ORDINARY_CONNECTIONS + 4) / MAX_STREAMS);
    for (let i = 0; i < needed; i++) keys.push(await key(['mcp:agents']));
    // Slow events: the point is how many are open, not what flows through them.
    await Promise.all(keys.flatMap(({ key: token }) => Array.from({ length: MAX_STREAMS }, () => hold(token, mcpUrl, { 'x-test-every': '1000' }))));
    expect(origin.open()).toBe(needed * MAX_STREAMS);

    // As above: a request waiting for one of the streams' connections would never get one, and be 504.
    const other = await key(['events:write']);
    const posted = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: other.key, json: { type: 'beside many streams' } });
    expect(posted.status).toBe(200);
    expect(origin.events).toContain('{"type":"beside many streams"}');
  }, 60_000);

  // How long the queued ones wait (the bound, not a connection's wait plus the bound) is a
  // figure: bench/attacks.ts, "queued-upstream". The deadline's own rule, on a moved clock:
  // test/unit/proxy/upstream-deadlines.test.ts.
  it('requests queued behind a full pool of hanging upstream calls are each 504 upstream_timeout, none left waiting', async () => {
    const count = ORDINARY_CONNECTIONS + 40;
    const answers = await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const response = await request(`${gateway.url}/hang/${i}`, { token: admin });
        return [response.status, response.body?.code];
      }),
    );
    expect(answers).toEqual(answers.map(() => [504, 'upstream_timeout']));
    // Never more upstream calls than requests: a timed-out one is not sent again.
    expect(origin.hanging()).toBeLessThanOrEqual(count);
  }, 60_000);

  it('DELETE closes the key\'s MCP stream and WebSocket tunnel before its 204, and nothing more arrives', async () => {
    const { key: token, id } = await key(['mcp:agents', 'events:write']);
    const stream = await hold(token);
    const tunnel = await openTunnel(`${gateway.url.replace('http:', 'ws:')}${EVENTS_PATH}`, token);
    held.push(tunnel);
    expect(origin.open()).toBe(2);

    await expectCutByDelete(`${gateway.url}/api/v1/api-keys/${id}`, admin, [stream, tunnel], origin);
    // Reconnecting with the revoked key is refused.
    const again = await openEventStream(mcpUrl, token);
    expect(again.status).toBe(401);
  });

  it('an event stream the request did not ask for is booked when it arrives: capped, and cut by DELETE before its 204', async () => {
    const { key: token, id } = await key(['events:write']);
    // No `Accept: text/event-stream`: only the answer says it is a stream.
    const unasked = { accept: '*/*', 'x-test-stream': '1' };
    const streams: HeldStream[] = [];
    for (let i = 0; i < MAX_STREAMS; i++) streams.push(await hold(token, `${gateway.url}${EVENTS_PATH}`, unasked));
    expect(origin.open()).toBe(MAX_STREAMS);

    const refused = await openEventStream(`${gateway.url}${EVENTS_PATH}`, token, unasked);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body!)).toMatchObject({ status: 429, code: 'too_many_streams' });
    // The refused one's upstream exchange was abandoned, not left open.
    await vi.waitFor(() => expect(origin.open()).toBe(MAX_STREAMS));

    await expectCutByDelete(`${gateway.url}/api/v1/api-keys/${id}`, admin, streams, origin);
  });

  it('an MCP POST answered with an event stream is not counted against the cap, and is cut by DELETE before its 204', async () => {
    const { key: token, id } = await key(['mcp:agents']);
    const posted = await Promise.all(Array.from({ length: MAX_STREAMS + 2 }, () => postAnsweredWithStream(mcpUrl, token)));
    expect(posted.map((each) => each.status)).toEqual(Array(MAX_STREAMS + 2).fill(200));
    held.push(...posted.map((each) => each.stream));
    expect(origin.open()).toBe(MAX_STREAMS + 2);

    await expectCutByDelete(`${gateway.url}/api/v1/api-keys/${id}`, admin, posted.map(({ stream }) => stream), origin);
  });

});

/** A JSON-RPC ping posted to MCP_PATH whose answer the upstream sends as an endless event stream, held once its first bytes arrive. */
function postAnsweredWithStream(url: string, token: string): Promise<{ status: number; stream: HeldStream }> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    let ended = false;
    const end = () => (ended = true);
    const request = httpRequest(url, {
      method: 'POST',
      agent: false,
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': PROTOCOL_VERSION,
        'x-test-stream': '1',
      },
    });
    request.on('socket', (socket: Socket) => socket.once('end', end).once('error', end).once('close', end));
    request.on('error', reject);
    request.on('response', (response) => {
      response.on('error', end);
      response.once('data', () => resolve({ status: response.statusCode!, stream: { received: () => bytes, ended: () => ended, close: () => request.destroy() } }));
      response.on('data', (chunk: Buffer) => (bytes += chunk.length));
    });
    request.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }));
  });
}
