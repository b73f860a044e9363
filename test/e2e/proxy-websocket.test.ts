import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

interface Outcome {
  opened: boolean;
  status: number | undefined;
  echo: string | undefined;
}

/** Opens a WebSocket through the gateway, sends one message and reports what happened. */
function connect(url: string, headers: Record<string, string>): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url, { headers });
    socket.once('unexpected-response', (_request, response) => {
      resolve({ opened: false, status: response.statusCode, echo: undefined });
      socket.terminate();
    });
    socket.once('open', () => socket.send('hello'));
    socket.once('message', (data) => {
      resolve({ opened: true, status: 101, echo: String(data) });
      socket.close();
    });
    socket.once('error', () => resolve({ opened: false, status: undefined, echo: undefined }));
  });
}

describe('WebSocket upgrades are authorized by the same rules, then proxied', () => {
  let f: ProxyFixture;
  let wsUrl: string;
  beforeAll(async () => {
    f = await startProxyFixture();
    wsUrl = f.gateway.url.replace('http:', 'ws:');
  });
  afterAll(async () => {
    await f?.close();
  });

  it('proxies an upgrade with a key holding events:write, with identity headers and no forged ones', async () => {
    f.origin.clear();
    const { key, id } = await f.key({ scopes: ['events:write'], agent_id: 7 });
    const outcome = await connect(`${wsUrl}/api/v1/agents/7/events?stream=1`, {
      authorization: `Bearer ${key}`,
      'x-auth-key-id': '999',
      'X_Auth_Admin_Id': '1',
    });
    expect(outcome).toEqual({ opened: true, status: 101, echo: 'echo: hello' });
    const [upgrade] = f.origin.received;
    expect(upgrade?.url).toBe('/api/v1/agents/7/events?stream=1');
    expect(upgrade?.headers['x-auth-kind']).toBe('api_key');
    expect(upgrade?.headers['x-auth-key-id']).toBe(String(id));
    expect(upgrade?.headers['x-auth-agent-id']).toBe('7');
    expect(upgrade?.headers.authorization).toBeUndefined();
    expect(upgrade?.rawHeaders.filter((name) => /^x[-_]auth[-_]admin/i.test(name))).toEqual([]);
  });

  it('refuses an upgrade without a credential with 401 and opens nothing upstream', async () => {
    f.origin.clear();
    const outcome = await connect(`${wsUrl}/api/v1/agents/7/events`, {});
    expect(outcome.opened).toBe(false);
    expect(outcome.status).toBe(401);
    expect(f.origin.received).toHaveLength(0);
  });

  it('refuses an upgrade by a key bound to another agent with 403', async () => {
    f.origin.clear();
    const { key } = await f.key({ scopes: ['events:write'], agent_id: 8 });
    const outcome = await connect(`${wsUrl}/api/v1/agents/7/events`, { authorization: `Bearer ${key}` });
    expect(outcome.status).toBe(403);
    expect(f.origin.received).toHaveLength(0);
  });

  it('refuses an upgrade on an ambiguous path with 400', async () => {
    f.origin.clear();
    const { key } = await f.key({ scopes: ['events:write'] });
    const outcome = await connect(`${wsUrl}/api/v1/agents/8%2f..%2f7/events`, { authorization: `Bearer ${key}` });
    expect(outcome.status).toBe(400);
    expect(f.origin.received).toHaveLength(0);
  });
});
