import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startPlatform, type Platform } from '../../examples/platform/platform.ts';
import { build, type Gateway } from '../../src/app.ts';
import { loadConfig } from '../../src/config/load.ts';
import { openStore } from '../../src/store/open.ts';
import { StoreUnavailableError } from '../../src/store/unavailable.ts';
import type { Store } from '../../src/store/store.ts';
import { FAST_ARGON2, REPO_ROOT, tempDataDir } from '../support/gateway-process.ts';
import { connectClient, postRpc, toolCall } from '../support/mcp.ts';

/**
 * With `HOST=localhost` the gateway listens on every address the name resolves to (127.0.0.1
 * and ::1 on most machines). Every one of them is the same door: a request on the second
 * address is decided by the same pipeline, forwarded the same way, and refused with the same
 * answer as on the first. Here `localhost` is made to name 127.0.0.1 and 127.0.0.2 (both
 * loopback on Linux), so the test runs the same on every machine.
 */
/** Who the audit trail says created the test's keys. */
const ADMIN = { kind: 'admin', id: '1', address: null } as const;

describe('the one door on every address HOST names', () => {
  let platform: Platform;
  let store: Store;
  let gateway: Gateway;
  /** The first address's base URL and the second's. */
  let urls: [string, string];
  let knowledgeKey: string;
  /** Store reads by prefix (a first use), and whether they fail as an unreachable store's do. */
  let prefixReads = 0;
  let storeDown = false;

  beforeAll(async () => {
    platform = await startPlatform({ quiet: true, sseMode: 'json', stateful: true });
    const config = loadConfig({ CONFIG_DIR: `${REPO_ROOT}config`, LOG_LEVEL: 'silent', UPSTREAM_URL: platform.url, ...FAST_ARGON2 });
    store = await openStore({ dataDir: tempDataDir() });
    const findApiKeyByPrefix = store.findApiKeyByPrefix.bind(store);
    store.findApiKeyByPrefix = (prefix) => {
      prefixReads++;
      return storeDown ? Promise.reject(new StoreUnavailableError(new Error('connection refused'))) : findApiKeyByPrefix(prefix);
    };
    gateway = await build(config, { store });
    await gateway.listen(0, 'localhost', async () => ['127.0.0.1', '127.0.0.2']);
    const { port } = gateway.app.server.address() as AddressInfo;
    urls = [`http://127.0.0.1:${port}`, `http://127.0.0.2:${port}`];
    ({ key: knowledgeKey } = await gateway.keys.createKey({ name: 'addresses', agentId: null, scopes: ['mcp:knowledge', 'events:write'], expiresAt: null }, ADMIN));
  });
  afterEach(() => {
    platform.reset();
    storeDown = false;
  });
  afterAll(async () => {
    await gateway?.app.close();
    await store?.close();
    await platform?.close();
  });

  it('an allowed MCP call on the second address opens a session and runs on the tool server, with the identity headers', async () => {
    const { client, transport } = await connectClient(`${urls[1]}/mcp`, knowledgeKey);
    try {
      expect(transport.sessionId).toEqual(expect.any(String));
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(['search_knowledge_base']);
      const result = await client.callTool({ name: 'search_knowledge_base', arguments: { query: 'opening hours' } });
      expect(result.isError).toBeFalsy();
      expect(platform.toolCalls.map((call) => call.tool)).toEqual(['search_knowledge_base']);
      expect(platform.toolCalls[0]!.headers).toMatchObject({ 'x-auth-kind': 'api_key', 'x-auth-scopes': 'mcp:knowledge events:write' });
    } finally {
      await client.close();
    }
  });

  it.each([0, 1])('address %i: a call outside the key\'s scopes is a JSON-RPC 403 and never reaches the tool server', async (address) => {
    const response = await postRpc(`${urls[address]}/mcp`, toolCall('place_outbound_call', { to: '+15550100' }), { key: knowledgeKey });
    expect(response.status).toBe(403);
    expect(response.headers.get('x-request-id')).toEqual(expect.any(String));
    expect(response.messages[0]).toMatchObject({ id: 1, error: { code: -32003, data: { code: 'insufficient_scope', scope: 'mcp:calls' } } });
    expect(platform.requests).toEqual([]);
  });

  it.each([0, 1])('address %i: no key is a problem+json 401 on MCP and on a forwarded path, and nothing is forwarded', async (address) => {
    const mcp = await postRpc(`${urls[address]}/mcp`, toolCall('search_knowledge_base', { query: 'x' }));
    expect(mcp.status).toBe(401);
    expect(mcp.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(mcp.text)).toMatchObject({ code: 'missing_credential' });
    const events = await fetch(`${urls[address]}/api/v1/agents/7/events`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(events.status).toBe(401);
    expect(await events.json()).toMatchObject({ code: 'missing_credential' });
    expect(platform.requests).toEqual([]);
    expect(platform.events).toEqual([]);
  });

  it.each([0, 1])('address %i: an allowed event is forwarded with the identity headers', async (address) => {
    const response = await fetch(`${urls[address]}/api/v1/agents/7/events`, {
      method: 'POST',
      body: JSON.stringify({ n: address }),
      headers: { authorization: `Bearer ${knowledgeKey}`, 'content-type': 'application/json' },
    });
    expect(response.status).toBeLessThan(300);
    expect(platform.events.map((event) => event.body)).toEqual([{ n: address }]);
    expect(platform.events[0]!.headers).toMatchObject({ 'x-auth-kind': 'api_key', 'x-auth-scopes': 'mcp:knowledge events:write' });
  });

  it('a store failure on a first use is decided once (one store read) and answered 503 problem+json, on either address', async () => {
    for (const url of urls) {
      const { key } = await gateway.keys.createKey({ name: 'first use', agentId: null, scopes: ['mcp:knowledge'], expiresAt: null }, ADMIN);
      storeDown = true;
      prefixReads = 0;
      const response = await postRpc(`${url}/mcp`, toolCall('search_knowledge_base', { query: 'x' }), { key });
      expect(response.status, url).toBe(503);
      expect(response.headers.get('content-type'), url).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(response.text), url).toMatchObject({ code: 'store_unavailable' });
      expect(prefixReads, url).toBe(1);
    }
    expect(platform.requests).toEqual([]);
  });

  /** What the two doors used to answer differently: now one answer, on every address. */
  it.each([
    ['a method not forwarded, on the MCP path', 'PROPFIND', '/mcp', 404, 'not_found'],
    ['a method not forwarded, on a forwarded path', 'PROPFIND', '/api/v1/agents/7/events', 404, 'not_found'],
    ['a method the MCP route does not list', 'PUT', '/mcp', 405, 'method_not_allowed'],
    ['a disguised MCP path', 'POST', '/%6dcp', 400, 'ambiguous_path'],
  ])('%s: %s %s is %i %s on both addresses', async (_what, method, path, status, code) => {
    for (const url of urls) {
      const response = await send(url, method, path, knowledgeKey);
      expect(response.status, url).toBe(status);
      expect(JSON.parse(response.body), url).toMatchObject({ code });
    }
    expect(platform.requests).toEqual([]);
  });

  it('the gateway\'s own endpoints answer on the second address too, and are never forwarded', async () => {
    const response = await fetch(`${urls[1]}/api/v1/api-keys`, { headers: { authorization: `Bearer ${knowledgeKey}` } });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ code: 'wrong_credential_type' });
    expect(platform.requests).toEqual([]);
  });
});

/** One request with the target sent exactly as given (fetch would normalise it). */
function send(url: string, method: string, path: string, key: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ host: hostname, port, method, path, agent: false, headers: { authorization: `Bearer ${key}`, 'content-length': '0' } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode!, body: Buffer.concat(chunks).toString() }));
      response.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}
