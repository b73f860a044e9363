import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';
import { postRpc, toolCall } from '../support/mcp.ts';

// Huge JSON-RPC batches (docs/security.md, "Holding under abuse"): at most MCP_MAX_BATCH messages,
// more is one small 400 — not one error per message (a 10,000-message batch of refused calls
// was once answered with 3.3 MB of errors) — and nothing reaches the upstream.

/** Refused calls, as small as a message gets, so 10,000 of them fit under the default BODY_LIMIT. */
const refusedCalls = (count: number) => Array.from({ length: count }, (_, id) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'place_outbound_call' } }));
const allowedCalls = (count: number) => Array.from({ length: count }, (_, id) => toolCall('list_agents', {}, id));

describe.each<{ setting: string; env: Record<string, string>; max: number }>([
  { setting: 'default', env: {}, max: 100 },
  { setting: 'MCP_MAX_BATCH=7', env: { MCP_MAX_BATCH: '7' }, max: 7 },
])('JSON-RPC batches on MCP_PATH, $setting', ({ env, max }) => {
  let fixture: ProxyFixture;
  let key: string;
  const post = (body: unknown) => postRpc(`${fixture.gateway.url}/mcp`, body, { key });

  beforeAll(async () => {
    fixture = await startProxyFixture({ LOG_LEVEL: 'warn', ...env });
    key = (await fixture.key({ scopes: ['mcp:agents'] })).key;
  });
  beforeEach(() => fixture.origin.clear());
  afterAll(async () => {
    await fixture?.close();
  });

  it.each([
    ['MCP_MAX_BATCH + 1 messages', max + 1],
    ['10,000 messages', 10_000],
  ])('a batch of %s is one 400 batch_too_large, small, and nothing is forwarded', async (_what, count) => {
    const body = JSON.stringify(refusedCalls(count));
    expect(Buffer.byteLength(body)).toBeLessThan(1_048_576);
    const response = await post(body);
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(response.text.length).toBeLessThan(512);
    expect(JSON.parse(response.text)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32600,
        message: `A JSON-RPC batch holds at most ${max} messages (this one ${count})`,
        data: { code: 'batch_too_large', status: 400, detail: `A JSON-RPC batch holds at most ${max} messages (this one ${count})` },
      },
    });
    expect(fixture.origin.received).toEqual([]);
  });

  it('a batch of exactly MCP_MAX_BATCH allowed messages is forwarded whole', async () => {
    const response = await post(allowedCalls(max));
    expect(response.status).toBe(200);
    expect(fixture.origin.received).toHaveLength(1);
    expect(JSON.parse(fixture.origin.received[0]!.body)).toHaveLength(max);
  });

  it('a batch of exactly MCP_MAX_BATCH with one refused call is still decided message by message', async () => {
    const response = await post([...allowedCalls(max - 1), toolCall('place_outbound_call', {}, 'x')]);
    expect(response.status).toBe(403);
    expect(response.messages.find((message) => message.id === 'x').error.data.code).toBe('insufficient_scope');
    expect(fixture.origin.received).toEqual([]);
  });
});
