import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from '../support/gateway-process.ts';
import { loginAdmin, request } from '../support/http.ts';
import { startInProcessGateway, TestClock, type InProcessGateway } from '../support/in-process-gateway.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { openEventStream, openTunnel, startStreamOrigin, type HeldStream, type StreamOrigin } from '../support/stream-origin.ts';

// Credentials that end with time: an API key's expires_at, an admin session's exp. The gateway is
// built in this process with a clock the test moves (`build()`'s `deps.now`), so no test waits for
// real time to pass, beyond a stream's last moments.

const EVENTS_PATH = '/api/v1/agents/1/events';
const HOUR_MS = 3_600_000;
/** How long a credential still has when its stream opens, in real time: the stream's timer runs for this long. */
const LEAD_MS = 500;

describe('an API key refused once its expires_at has passed (the clock moved on)', () => {
  const clock = new TestClock();
  let origin: Origin;
  let gateway: InProcessGateway;

  beforeAll(async () => {
    origin = await startOrigin();
    gateway = await startInProcessGateway({ UPSTREAM_URL: origin.url }, clock.now);
  });
  afterAll(async () => {
    await gateway?.close();
    await origin?.close();
  });

  it('an expired key is refused once expires_at has passed', async () => {
    const expiresAt = new Date(clock.now().getTime() + HOUR_MS).toISOString();
    const { key } = await gateway.key({ scopes: ['events:write'], expires_at: expiresAt });
    expect((await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: key, json: {} })).status).toBe(200);
    clock.advanceTo(Date.parse(expiresAt) + 50);
    origin.clear();
    const refused = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: key, json: {} });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('expired_credential');
    expect(origin.received).toHaveLength(0);
    const listed = (await request(`${gateway.url}/api/v1/api-keys`, { token: await loginAdmin(gateway.url) })).body;
    expect(listed.find((record: { key_prefix: string }) => key.startsWith(record.key_prefix)).status).toBe('expired');
  });
});

describe('credentials that end while their streams are open (the clock moved on)', () => {
  const clock = new TestClock();
  let origin: StreamOrigin;
  let gateway: InProcessGateway;
  const held: HeldStream[] = [];

  const hold = async (url: string, token: string) => {
    const outcome = await openEventStream(url, token);
    if (outcome.stream === undefined) throw new Error(`stream refused: ${outcome.status} ${outcome.body}`);
    held.push(outcome.stream);
    return outcome.stream;
  };

  beforeAll(async () => {
    origin = await startStreamOrigin();
    gateway = await startInProcessGateway({ UPSTREAM_URL: origin.url }, clock.now);
  });
  afterEach(async () => {
    for (const stream of held.splice(0)) stream.close();
    await vi.waitFor(() => expect(origin.open()).toBe(0), { timeout: 10_000 });
  });
  afterAll(async () => {
    await gateway?.close();
    await origin?.close();
  });

  it('a key whose expires_at passes while its stream is open: the stream is closed at expiry', async () => {
    const expiresAt = new Date(clock.now().getTime() + HOUR_MS);
    const { key } = await gateway.key({ scopes: ['mcp:agents'], expires_at: expiresAt.toISOString() });
    // Used once a minute before (within KEY_CACHE_TTL), so the key is verified and cached when it matters.
    clock.advanceTo(expiresAt.getTime() - 60_000);
    (await hold(`${gateway.url}/mcp`, key)).close();
    clock.advanceTo(expiresAt.getTime() - LEAD_MS);
    const stream = await hold(`${gateway.url}/mcp`, key);
    await vi.waitFor(() => expect(stream.ended()).toBe(true), { timeout: 15_000, interval: 20 });
    const closedAt = clock.now().getTime();
    expect(closedAt).toBeGreaterThanOrEqual(expiresAt.getTime() - 50);
  });

  it('an admin session that expires while its WebSocket tunnel is open: the tunnel is closed at the token\'s exp', async () => {
    // ADMIN_SESSION_TTL is the default 8 hours.
    const login = await request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    expect(login.status).toBe(200);
    const expiresAt = Date.parse(login.body.expires_at as string);
    expect(expiresAt - clock.now().getTime()).toBeGreaterThan(7 * HOUR_MS);
    clock.advanceTo(expiresAt - LEAD_MS);
    const tunnel = await openTunnel(`${gateway.url.replace('http:', 'ws:')}/dashboard/live`, login.body.token as string);
    held.push(tunnel);
    await vi.waitFor(() => expect(tunnel.ended()).toBe(true), { timeout: 15_000, interval: 20 });
    const closedAt = clock.now().getTime();
    expect(closedAt).toBeGreaterThanOrEqual(expiresAt - 50);
    await vi.waitFor(() => expect(origin.open()).toBe(0));
  });
});
