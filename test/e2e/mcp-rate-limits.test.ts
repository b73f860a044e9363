import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { parse, stringify } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/gateway-process.ts';
import { createKey, request } from '../support/http.ts';
import { BATCH_REVISION, connectClient, connectLegacyClient, openSession, postRpc, refusalOf, startMcpStack, type McpStack } from '../support/mcp.ts';
import { rateLimitField } from '../support/rate-limit-fields.ts';
import { metric } from '../support/replicas.ts';

/** The shipped tables, with `limits:` giving place_outbound_call 3 calls a minute per key. */
function configWithToolLimit(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-tool-limits-'));
  const tools = parse(readFileSync(join(REPO_ROOT, 'config/mcp-tools.yaml'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'mcp-tools.yaml'), stringify({ ...tools, limits: { place_outbound_call: { requests: 3, per_seconds: 60 } } }));
  writeFileSync(join(dir, 'routes.yaml'), readFileSync(join(REPO_ROOT, 'config/routes.yaml')));
  return dir;
}

const CALL = { name: 'place_outbound_call', arguments: { to: '+15550100' } };

/**
 * A tool limit (docs/mcp.md, "Rate limits per tool") through the gateway with the official SDK
 * client, against the example platform's SDK McpServer: what ran is read from the platform's
 * own record of executions.
 */
describe('MCP rate limits with the SDK client', () => {
  let stack: McpStack;
  const clients: Client[] = [];
  const connect = async (key: string) => {
    const { client, transport } = await connectClient(stack.mcpUrl, key);
    clients.push(client);
    return Object.assign(client, { sessionId: transport.sessionId });
  };
  const calls = (tool: string) => stack.platform.toolCalls.filter((call) => call.tool === tool);

  beforeAll(async () => {
    stack = await startMcpStack({ sseMode: 'json', stateful: true, legacySsePath: '/sse', legacyMessagesPath: '/messages' }, { CONFIG_DIR: configWithToolLimit(), MCP_SSE_PATH: '/sse', MCP_MESSAGES_PATH: '/messages' });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
    stack.platform.reset();
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('a tool limit on place_outbound_call holds while the same key\'s other tools keep working', async () => {
    const { key, id } = await stack.key(['mcp:calls', 'mcp:agents']);
    const client = await connect(key);
    for (let i = 0; i < 3; i++) expect((await client.callTool(CALL)).isError).toBeFalsy();
    const refusal = await refusalOf(client.callTool(CALL));
    expect(refusal.status).toBe(429);
    expect(refusal.body).toMatchObject({
      jsonrpc: '2.0',
      id: expect.any(Number),
      error: { data: { code: 'rate_limited', status: 429, detail: 'The rate limit of place_outbound_call for this API key is reached (3 per 60 s)' } },
    });
    expect(refusal.body.error.data.retry_after).toBeGreaterThanOrEqual(58);
    // The key's other tools, on the same session, are not limited.
    for (let i = 0; i < 5; i++) expect((await client.callTool({ name: 'list_agents', arguments: {} })).isError).toBeFalsy();
    expect(calls('place_outbound_call')).toHaveLength(3);
    expect(calls('list_agents')).toHaveLength(5);
    expect(calls('place_outbound_call').every((call) => call.headers['x-auth-key-id'] === String(id))).toBe(true);
  });

  it('counted per key, not per session or transport: a new session, or the legacy transport, finds it used up; another key has its own', async () => {
    const { key } = await stack.key(['mcp:calls']);
    const first = await connect(key);
    for (let i = 0; i < 3; i++) await first.callTool(CALL);
    const second = await connect(key);
    expect((await refusalOf(second.callTool(CALL))).status).toBe(429);
    const legacy = await connectLegacyClient(`${stack.gateway.url}/sse`, key);
    clients.push(legacy.client);
    expect((await refusalOf(legacy.client.callTool(CALL))).status).toBe(429);
    const other = await connect((await stack.key(['mcp:calls'])).key);
    expect((await other.callTool(CALL)).isError).toBeFalsy();
    expect(calls('place_outbound_call')).toHaveLength(4);
  });

  it('the HTTP answer: Retry-After, and the key\'s and the tool\'s limits in RateLimit-Policy and RateLimit', async () => {
    const created = await createKey(stack.gateway.url, stack.admin, { name: 'both limits', scopes: ['mcp:calls'], rate_limit: { requests: 100, per_seconds: 60 } });
    const key = created.body.key as string;
    // The handshake: two requests of the key's hundred.
    const sessionId = await openSession(stack.mcpUrl, key);
    const call = (id: number) => postRpc(stack.mcpUrl, { jsonrpc: '2.0', id, method: 'tools/call', params: CALL }, { key, sessionId });
    const before = await metric(stack.gateway, 'gatehouse_rate_limited_total', { limit: 'tool' });
    for (let i = 1; i <= 3; i++) {
      const answer = await call(i);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('ratelimit-policy')).toBe('"key";q=100;w=60, "tool:place_outbound_call";q=3;w=60');
      expect(answer.headers.get('ratelimit')).toMatch(new RegExp(`^"key";r=${98 - i};t=\\d+, "tool:place_outbound_call";r=${3 - i};t=\\d+$`));
      expect(rateLimitField(answer.headers)).toMatchObject({ q: 100, w: 60, r: 98 - i });
      expect(rateLimitField(answer.headers, 'tool:place_outbound_call')).toMatchObject({ q: 3, w: 60, r: 3 - i });
    }
    const refused = await call(4);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(58);
    expect(refused.headers.get('ratelimit')).toMatch(/^"key";r=95;t=\d+, "tool:place_outbound_call";r=0;t=\d+$/);
    expect(refused.messages).toMatchObject([{ id: 4, error: { data: { code: 'rate_limited' } } }]);
    // A batch with the tool in it is refused whole: nothing of it runs.
    const batch = await postRpc(stack.mcpUrl, [{ jsonrpc: '2.0', id: 5, method: 'ping' }, { jsonrpc: '2.0', id: 6, method: 'tools/call', params: CALL }], { key, sessionId, headers: { 'mcp-protocol-version': '2025-03-26' } });
    expect(batch.status).toBe(429);
    expect(batch.messages.map((message) => message.error?.data?.code)).toEqual(['rate_limited', 'rate_limited']);
    expect(calls('place_outbound_call')).toHaveLength(3);
    expect(await metric(stack.gateway, 'gatehouse_rate_limited_total', { limit: 'tool' })).toBe(before + 2);
  });

  const keyQuota = (answer: { headers: Headers }) => rateLimitField(answer.headers);
  const posts = () => stack.platform.requests.filter((received) => received.method === 'POST');
  const pings = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ jsonrpc: '2.0', id: from + i, method: 'ping' }));

  it('a batch of n messages is n requests against the key\'s own limit; one needing more than is left is refused whole, nothing forwarded', async () => {
    const created = await createKey(stack.gateway.url, stack.admin, { name: 'batches', scopes: ['mcp:agents'], rate_limit: { requests: 10, per_seconds: 60 } });
    const key = created.body.key as string;
    // The handshake: two of the ten.
    const sessionId = await openSession(stack.mcpUrl, key);
    const batch = (from: number, count: number) => postRpc(stack.mcpUrl, pings(from, count), { key, sessionId, headers: { 'mcp-protocol-version': BATCH_REVISION } });
    const forwardedBefore = posts().length;

    const five = await batch(1, 5);
    expect(five.status).toBe(200);
    expect(five.messages.map((message) => message.id).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(keyQuota(five).r).toBe(3);
    expect(posts()).toHaveLength(forwardedBefore + 1);
    expect(JSON.parse(posts().at(-1)!.body)).toHaveLength(5);

    const four = await batch(10, 4);
    expect(four.status).toBe(429);
    expect(Number(four.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(four.messages.map((message) => [message.id, message.error.code, message.error.data.code])).toEqual([10, 11, 12, 13].map((id) => [id, -32600, 'rate_limited']));
    expect(four.messages[0].error.data.detail).toBe("The API key's rate limit is reached (10 per 60 s)");
    // Nothing of it was forwarded, and it took nothing: the three left are still there.
    expect(posts()).toHaveLength(forwardedBefore + 1);
    expect(keyQuota(four).r).toBe(3);

    const three = await batch(20, 3);
    expect(three.status).toBe(200);
    expect(keyQuota(three).r).toBe(0);
    expect(posts()).toHaveLength(forwardedBefore + 2);
    const more = await postRpc(stack.mcpUrl, { jsonrpc: '2.0', id: 30, method: 'ping' }, { key, sessionId });
    expect(more.status).toBe(429);
    expect(posts()).toHaveLength(forwardedBefore + 2);
  });

  it('a batch of more messages than the key\'s whole limit is refused at once (no wait would admit it), counting nothing', async () => {
    const created = await createKey(stack.gateway.url, stack.admin, { name: 'small', scopes: ['mcp:agents'], rate_limit: { requests: 5, per_seconds: 60 } });
    const key = created.body.key as string;
    const sessionId = await openSession(stack.mcpUrl, key);
    const forwardedBefore = posts().length;
    const before = await metric(stack.gateway, 'gatehouse_rate_limited_total', { limit: 'key' });
    const refused = await postRpc(stack.mcpUrl, pings(1, 6), { key, sessionId, headers: { 'mcp-protocol-version': BATCH_REVISION } });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(refused.messages[0].error.data).toMatchObject({ code: 'rate_limited', detail: "The batch holds 6 messages; the API key's rate limit allows 5 per 60 s" });
    expect(posts()).toHaveLength(forwardedBefore);
    expect(keyQuota(refused).r).toBe(3);
    expect(await metric(stack.gateway, 'gatehouse_rate_limited_total', { limit: 'key' })).toBe(before + 1);
  });

  it.each(['2025-06-18', '2025-11-25', '2026-07-28'])('a batch under %s (a revision without batches) is 400 with JSON-RPC -32600, nothing forwarded, nothing counted', async (revision) => {
    const created = await createKey(stack.gateway.url, stack.admin, { name: 'modern', scopes: ['mcp:agents'], rate_limit: { requests: 10, per_seconds: 60 } });
    const key = created.body.key as string;
    const sessionId = await openSession(stack.mcpUrl, key);
    const forwardedBefore = posts().length;
    const refused = await postRpc(stack.mcpUrl, pings(1, 2), { key, sessionId, headers: { 'mcp-protocol-version': revision } });
    expect(refused.status).toBe(400);
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
    const detail = `MCP-Protocol-Version ${revision} has no JSON-RPC batches: send each message in a request of its own`;
    expect(refused.messages).toEqual([1, 2].map((id) => ({ jsonrpc: '2.0', id, error: { code: -32600, message: detail, data: { code: 'validation_failed', status: 400, detail } } })));
    expect(posts()).toHaveLength(forwardedBefore);
    // Refused by a rule before the limits: counted nothing (two of ten went to the handshake).
    expect(keyQuota(refused).r).toBe(8);
    // The same messages one by one, in the session's own revision, pass.
    const single = await postRpc(stack.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'ping' }, { key, sessionId });
    expect(single.status).toBe(200);
    expect(keyQuota(single).r).toBe(7);
    expect(posts()).toHaveLength(forwardedBefore + 1);
  });

  it('a key\'s own limit counts every request on the MCP paths, the handshake included', async () => {
    const created = await createKey(stack.gateway.url, stack.admin, { name: 'tight', scopes: ['mcp:agents'], rate_limit: { requests: 4, per_seconds: 60 } });
    const key = created.body.key as string;
    // initialize and notifications/initialized: two of the four.
    const sessionId = await openSession(stack.mcpUrl, key);
    const ping = (id: number) => postRpc(stack.mcpUrl, { jsonrpc: '2.0', id, method: 'ping' }, { key, sessionId });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await ping(i)).status);
    expect(statuses).toEqual([200, 200, 429, 429]);
    expect(stack.platform.requests.filter((received) => received.method === 'POST')).toHaveLength(4);
    const refused = await request(stack.mcpUrl, { method: 'GET', token: key, headers: { accept: 'text/event-stream' } });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('ratelimit')).toMatch(/^"key";r=0;t=\d+$/);
  });
});
