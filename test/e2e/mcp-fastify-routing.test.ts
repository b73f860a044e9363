import { createServer, type Server } from 'node:http';
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
 * MCP requests are served from the server's request listener, not by fastify's router. But
 * fastify routes some requests itself: with `HOST` resolving to several addresses
 * (`localhost` → 127.0.0.1 and ::1), it opens one server per address, and only the first has
 * the gateway's listener; the others call fastify's router (`app.routing`) directly. This
 * serves a built gateway exactly that way and checks that its MCP paths are still decided,
 * forwarded and refused as on the main listener.
 */
describe('MCP requests that reach fastify\'s router directly (a second address of HOST)', () => {
  let platform: Platform;
  let store: Store;
  let gateway: Gateway;
  let server: Server;
  let mcpUrl: string;
  /** The gateway's own listener (the request listener in front of fastify), for comparison. */
  let listenerMcpUrl: string;
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
    await gateway.app.ready();
    ({ key: knowledgeKey } = await gateway.keys.createKey({ name: 'fastify routing', agentId: null, scopes: ['mcp:knowledge'], expiresAt: null }));
    // What fastify does for each further address: a server whose handler is its router.
    server = createServer(gateway.app.routing);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    mcpUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
    await gateway.app.listen({ port: 0, host: '127.0.0.1' });
    listenerMcpUrl = `http://127.0.0.1:${(gateway.app.server.address() as AddressInfo).port}/mcp`;
  });
  afterEach(() => {
    platform.reset();
    storeDown = false;
  });
  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await gateway?.app.close();
    await store?.close();
    await platform?.close();
  });

  it('an allowed call opens a session and runs on the tool server, with the identity headers', async () => {
    const { client, transport } = await connectClient(mcpUrl, knowledgeKey);
    try {
      expect(transport.sessionId).toEqual(expect.any(String));
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(['search_knowledge_base']);
      const result = await client.callTool({ name: 'search_knowledge_base', arguments: { query: 'opening hours' } });
      expect(result.isError).toBeFalsy();
      expect(platform.toolCalls.map((call) => call.tool)).toEqual(['search_knowledge_base']);
      expect(platform.toolCalls[0]!.headers).toMatchObject({ 'x-auth-kind': 'api_key', 'x-auth-scopes': 'mcp:knowledge' });
    } finally {
      await client.close();
    }
  });

  it('a call outside the key\'s scopes is a JSON-RPC 403 and never reaches the tool server', async () => {
    const response = await postRpc(mcpUrl, toolCall('place_outbound_call', { to: '+15550100' }), { key: knowledgeKey });
    expect(response.status).toBe(403);
    expect(response.headers.get('x-request-id')).toEqual(expect.any(String));
    expect(response.messages[0]).toMatchObject({ id: 1, error: { code: -32003, data: { code: 'insufficient_scope', scope: 'mcp:calls' } } });
    expect(platform.requests).toEqual([]);
  });

  it('no key is a problem+json 401, as on every path, and nothing is forwarded', async () => {
    const response = await postRpc(mcpUrl, toolCall('search_knowledge_base', { query: 'x' }));
    expect(response.status).toBe(401);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(response.text)).toMatchObject({ code: 'missing_credential' });
    expect(platform.requests).toEqual([]);
  });

  it('a store failure on a first use is decided once (one store read) and answered 503 problem+json, on either path', async () => {
    for (const url of [listenerMcpUrl, mcpUrl]) {
      const { key } = await gateway.keys.createKey({ name: 'first use', agentId: null, scopes: ['mcp:knowledge'], expiresAt: null });
      storeDown = true;
      prefixReads = 0;
      const response = await postRpc(url, toolCall('search_knowledge_base', { query: 'x' }), { key });
      expect(response.status, url).toBe(503);
      expect(response.headers.get('content-type'), url).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(response.text), url).toMatchObject({ code: 'store_unavailable' });
      expect(prefixReads, url).toBe(1);
    }
    expect(platform.requests).toEqual([]);
  });
});
