import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { adminRequest, openEventStream, openTunnel, startStreamOrigin, type HeldStream, type StreamOrigin } from '../support/stream-origin.ts';

// "Holding under abuse": one key holding the upstream, and a credential that ends while its
// stream is open. Real processes: a spawned gateway in front of an upstream that never ends
// its streams (test/support/stream-origin.ts).

const MAX_STREAMS = 4;
const TIMEOUT_MS = 1_000;
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

    const other = await key(['events:write']);
    const started = performance.now();
    const posted = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: other.key, json: { type: 'served' } });
    expect(posted.status).toBe(200);
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS);
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

    const other = await key(['events:write']);
    const started = performance.now();
    const posted = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: other.key, json: { type: 'beside many streams' } });
    expect(posted.status).toBe(200);
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS);
    expect(origin.events).toContain('{"type":"beside many streams"}');
  }, 60_000);

  it('UPSTREAM_TIMEOUT counts the wait for a connection: requests queued behind a full pool are 504 at the bound', async () => {
    const count = ORDINARY_CONNECTIONS + 40;
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const response = await request(`${gateway.url}/hang/${i}`, { token: admin });
        return { status: response.status, code: response.body?.code, seconds: (performance.now() - started) / 1000 };
      }),
    );
    expect(answers.map((answer) => [answer.status, answer.code])).toEqual(answers.map(() => [504, 'upstream_timeout']));
    const slowest = Math.max(...answers.map((answer) => answer.seconds));
    // Before: the queued ones waited for a connection, then a whole bound more (2 s here).
    expect(slowest).toBeGreaterThanOrEqual(TIMEOUT_MS / 1000);
    expect(slowest).toBeLessThan((1.8 * TIMEOUT_MS) / 1000);
    expect(origin.hanging()).toBeLessThanOrEqual(count);
  }, 30_000);

  it('DELETE closes the key\'s MCP stream and WebSocket tunnel before its 204, and nothing more arrives', async () => {
    const { key: token, id } = await key(['mcp:agents', 'events:write']);
    const stream = await hold(token);
    const tunnel = await openTunnel(`${gateway.url.replace('http:', 'ws:')}${EVENTS_PATH}`, token);
    held.push(tunnel);
    expect(origin.open()).toBe(2);

    const deleted = await adminRequest(`${gateway.url}/api/v1/api-keys/${id}`, 'DELETE', admin, () => ({
      stream: { ended: stream.ended(), received: stream.received() },
      tunnel: { ended: tunnel.ended(), received: tunnel.received() },
    }));
    expect(deleted.status).toBe(204);
    expect(deleted.seen.stream.ended).toBe(true);
    expect(deleted.seen.tunnel.ended).toBe(true);
    // The upstream's side is closed too, and the client received nothing after the 204.
    await vi.waitFor(() => expect(origin.open()).toBe(0));
    expect(stream.received()).toBe(deleted.seen.stream.received);
    expect(tunnel.received()).toBe(deleted.seen.tunnel.received);
    // Reconnecting with the revoked key is refused.
    const again = await openEventStream(mcpUrl, token);
    expect(again.status).toBe(401);
  });

  it('a key whose expires_at passes while its stream is open: the stream is closed at expiry', async () => {
    const expiresAt = new Date(Date.now() + 2_000);
    const { key: token } = await key(['mcp:agents'], { expires_at: expiresAt.toISOString() });
    const stream = await hold(token);
    await vi.waitFor(() => expect(stream.ended()).toBe(true), { timeout: 5_000, interval: 20 });
    const closedAt = Date.now();
    expect(closedAt).toBeGreaterThanOrEqual(expiresAt.getTime() - 50);
    expect(closedAt).toBeLessThan(expiresAt.getTime() + 500);
  });
});

describe('an admin session that expires while its WebSocket tunnel is open', () => {
  let origin: StreamOrigin;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    origin = await startStreamOrigin();
    gateway = await startGateway({ UPSTREAM_URL: origin.url, ADMIN_SESSION_TTL: '3s', LOG_LEVEL: 'warn' });
  }, 60_000);
  afterAll(async () => {
    await gateway?.stop();
    await origin?.close();
  });

  it('the tunnel is closed at the token\'s exp', async () => {
    const login = await request(`${gateway.url}/api/v1/auth/login`, {
      method: 'POST',
      json: { email: gateway.env.ADMIN_EMAIL, password: gateway.env.ADMIN_PASSWORD },
    });
    expect(login.status).toBe(200);
    const expiresAt = Date.parse(login.body.expires_at as string);
    const tunnel = await openTunnel(`${gateway.url.replace('http:', 'ws:')}/dashboard/live`, login.body.token as string);
    await vi.waitFor(() => expect(tunnel.ended()).toBe(true), { timeout: 6_000, interval: 20 });
    const closedAt = Date.now();
    expect(closedAt).toBeGreaterThanOrEqual(expiresAt - 50);
    expect(closedAt).toBeLessThan(expiresAt + 500);
    await vi.waitFor(() => expect(origin.open()).toBe(0));
  });
});
