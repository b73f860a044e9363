import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startGateway } from '../support/gateway-process.ts';
import { createKey, loginAdmin } from '../support/http.ts';
import { CLIENT_MODES, connectAs, toolCallExchange, type ClientMode, type GenerationClient, type McpUrls } from '../support/mcp-clients.ts';
import { postRpc, startMcpStack, type McpStack } from '../support/mcp.ts';
import { rawRequest } from '../support/raw-http.ts';

// Both MCP SDK generations on both sides of the gateway: the example platform's MCP server
// from `@modelcontextprotocol/sdk` 1.x (the 2025 era, and the legacy HTTP+SSE transport) or
// from `@modelcontextprotocol/server` 2.x (the 2025 era and the 2026-07-28 era on one path),
// and as clients the 1.x client and the 2.x client in each of its negotiation modes
// (test/support/mcp-clients.ts). One key with mcp:agents: it sees and runs list_agents and
// get_agent_status, and place_outbound_call (mcp:calls) is refused by the gateway.
// What ran is asserted on the platform's own record (`platform.toolCalls`).
// get_agent_status marks its `agent_id` with `x-mcp-header: Agent-Id` (examples/platform/tools.ts):
// a 2026-07-28 client mirrors it into `Mcp-Param-Agent-Id`, which the gateway checks against the
// schema it learnt from the tools/list answers it relayed.

const AGENT_TOOLS = ['get_agent_status', 'list_agents'];
const LEGACY_PATHS = { legacySsePath: '/sse', legacyMessagesPath: '/messages' };
const LEGACY_ENV = { MCP_SSE_PATH: '/sse', MCP_MESSAGES_PATH: '/messages' };

const pinned = (mode: ClientMode) => typeof mode.negotiation === 'object';

const MODERN = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } };

/** A request of the 2026-07-28 revision: its version in `_meta`, as its clients send it. */
const modern = (method: string, params: Record<string, unknown> = {}, id = 1) => ({ jsonrpc: '2.0', id, method, params: { ...params, _meta: META } });

/** The headers a 2026-07-28 client sends with a message of `method` (and `name`). */
function mirrorsOf(method: string, name?: string): Record<string, string> {
  return { 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(name === undefined ? {} : { 'mcp-name': name }) };
}

/** The gateway's own refusal of a `Mcp-Param-*` header: 400, -32020, `header_mismatch`, for the request's id. */
function headerMismatch(id: number, detail: RegExp) {
  const text = expect.stringMatching(detail);
  return { jsonrpc: '2.0', id, error: { code: -32020, message: text, data: { code: 'header_mismatch', status: 400, detail: text } } };
}

describe.each(['v1', 'v2'] as const)('the %s SDK platform behind the gateway', (sdk) => {
  let stack: McpStack;
  let key: string;
  let keyId: number;
  let urls: McpUrls;

  beforeAll(async () => {
    // The 2.x server has no HTTP+SSE transport: the legacy stream is offered with the 1.x one only.
    stack = sdk === 'v1' ? await startMcpStack(LEGACY_PATHS, LEGACY_ENV) : await startMcpStack({ sdk });
    ({ key, id: keyId } = await stack.key(['mcp:agents']));
    urls = { mcpUrl: stack.mcpUrl, ...(sdk === 'v1' ? { sseUrl: `${stack.gateway.url}/sse` } : {}) };
  });
  afterEach(() => stack.platform.reset());
  afterAll(async () => {
    await stack?.close();
  });

  // A pinned 2026-07-28 client cannot connect to the 1.x server at all: see the last test.
  const modes = CLIENT_MODES.filter((mode) => sdk === 'v1' ? !pinned(mode) : mode.transport === 'streamable');

  describe.each(modes)('$label', (mode) => {
    // Against the 1.x server, `auto` finds no 2026-07-28 and falls back to `initialize`.
    const era = sdk === 'v1' ? 'legacy' : mode.era;
    let client: GenerationClient;
    beforeAll(async () => {
      client = await connectAs(mode, urls, key);
    });
    afterAll(async () => {
      await client?.close();
    });

    it(`connects in the ${era} era and lists only the tools of the key's scopes`, async () => {
      expect(client.era).toBe(era);
      const tools = await client.listTools();
      expect(tools.map((tool) => tool.name).sort()).toEqual(AGENT_TOOLS);
      // The annotation gets through the gateway's filter, whichever the era.
      expect(tools.find((tool) => tool.name === 'get_agent_status')?.inputSchema).toMatchObject({
        type: 'object',
        properties: { agent_id: { type: 'integer', 'x-mcp-header': 'Agent-Id' } },
      });
      const listed = client.wire.findLast((exchange) => (exchange.message as { method?: string } | undefined)?.method === 'tools/list');
      if (mode.transport === 'streamable') {
        const revision = era === 'modern' ? '2026-07-28' : (mode.protocolVersions?.[0] ?? expect.stringMatching(/^2025-/));
        expect(listed?.requestHeaders.get('mcp-protocol-version')).toEqual(revision);
      }
      // The full list went to the platform; the gateway filtered its answer.
      expect(stack.platform.requests.some((request) => request.body.includes('"tools/list"'))).toBe(true);
    });

    it('runs an allowed tool: the platform records its name, arguments and the identity headers', async () => {
      const result = await client.callTool('get_agent_status', { agent_id: 2 });
      expect(result.isError).toBeFalsy();
      expect(JSON.parse((result.content as Array<{ text: string }>)[0]!.text)).toEqual({ agent_id: 2, status: 'active', active_calls: 0 });

      expect(stack.platform.toolCalls).toEqual([expect.objectContaining({ tool: 'get_agent_status', arguments: { agent_id: 2 } })]);
      const [call] = stack.platform.toolCalls;
      expect(call!.headers).toMatchObject({ 'x-auth-kind': 'api_key', 'x-auth-key-id': String(keyId), 'x-auth-scopes': 'mcp:agents' });
      expect(call!.headers.authorization).toBeUndefined();
      if (era === 'modern') {
        // No sessions in 2026-07-28; the method, the tool and the annotated argument are mirrored in headers.
        expect(call!.sessionId).toBeUndefined();
        expect(call!.headers).toMatchObject({ 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'get_agent_status', 'mcp-param-agent-id': '2' });
      } else {
        expect(call!.sessionId).toEqual(expect.any(String));
        // The 2025 era has no mirror headers.
        expect(call!.headers['mcp-param-agent-id']).toBeUndefined();
      }
    });

    it("refuses a tool outside the key's scopes with 403 insufficient_scope; the platform records nothing", async () => {
      await expect(client.callTool('place_outbound_call', { to: '+15550100' })).rejects.toThrow();
      const exchange = toolCallExchange(client.wire, 'place_outbound_call');
      expect(exchange?.status).toBe(403);
      expect(exchange!.headers.get('www-authenticate')).toMatch(/^Bearer .*error="insufficient_scope", scope="mcp:calls"/);
      expect(exchange!.headers.get('content-type')).toMatch(/^application\/json/);
      const id = (exchange!.message as { id: unknown }).id;
      expect(JSON.parse((await exchange!.body)!)).toMatchObject({ jsonrpc: '2.0', id, error: { data: { code: 'insufficient_scope', scope: 'mcp:calls' } } });
      expect(stack.platform.toolCalls).toEqual([]);
      expect(stack.platform.requests.some((request) => request.body.includes('place_outbound_call'))).toBe(false);
    });
  });

  if (sdk === 'v2') {
    it('checks Mcp-Param-* against the schema it learnt: a header that disagrees, is not annotated or comes twice is refused with 400 -32020', async () => {
      // The gateway learns the annotations from a tools/list answer it relays.
      const listed = await postRpc(stack.mcpUrl, modern('tools/list', {}, 1), { key, headers: mirrorsOf('tools/list') });
      expect(listed.status).toBe(200);
      expect(listed.messages[0].result.tools.find((tool: { name: string }) => tool.name === 'get_agent_status').inputSchema.properties.agent_id).toMatchObject({ 'x-mcp-header': 'Agent-Id' });
      stack.platform.reset();

      const call = (id: number) => modern('tools/call', { name: 'get_agent_status', arguments: { agent_id: 2 } }, id);
      const headers = mirrorsOf('tools/call', 'get_agent_status');
      const disagrees = await postRpc(stack.mcpUrl, call(2), { key, headers: { ...headers, 'mcp-param-agent-id': '3' } });
      expect(disagrees.status).toBe(400);
      expect(disagrees.messages).toEqual([headerMismatch(2, /^Mcp-Param-agent-id does not match the argument it mirrors$/i)]);

      const notAnnotated = await postRpc(stack.mcpUrl, call(3), { key, headers: { ...headers, 'mcp-param-agent-id': '2', 'mcp-param-region': 'x' } });
      expect(notAnnotated.status).toBe(400);
      expect(notAnnotated.messages).toEqual([headerMismatch(3, /^Mcp-Param-region is not a parameter get_agent_status mirrors/i)]);

      // fetch would merge the two into one `2, 2`: the exact bytes go over a socket.
      const body = JSON.stringify(call(4));
      const { port, pathname } = new URL(stack.mcpUrl);
      const twice = await rawRequest(
        Number(port),
        [
          `POST ${pathname} HTTP/1.1`,
          `Host: 127.0.0.1:${port}`,
          `Authorization: Bearer ${key}`,
          'Content-Type: application/json',
          'Accept: application/json, text/event-stream',
          ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
          'Mcp-Param-Agent-Id: 2',
          'Mcp-Param-Agent-Id: 2',
          `Content-Length: ${Buffer.byteLength(body)}`,
          'Connection: close',
          '',
          body,
        ].join('\r\n'),
      );
      expect(twice.status).toBe(400);
      expect(JSON.parse(twice.body)).toEqual(headerMismatch(4, /^Mcp-Param-agent-id was sent more than once$/i));

      // Nothing of the three reached the platform.
      expect(stack.platform.requests).toEqual([]);
      expect(stack.platform.toolCalls).toEqual([]);

      const matching = await postRpc(stack.mcpUrl, call(5), { key, headers: { ...headers, 'mcp-param-agent-id': '2' } });
      expect(matching.status).toBe(200);
      expect(JSON.parse(matching.messages[0].result.content[0].text)).toEqual({ agent_id: 2, status: 'active', active_calls: 0 });
      expect(stack.platform.requests).toHaveLength(1);
      expect(stack.platform.toolCalls).toEqual([expect.objectContaining({ tool: 'get_agent_status', arguments: { agent_id: 2 }, headers: expect.objectContaining({ 'mcp-param-agent-id': '2' }) })]);

      // Absent, it is the tool server's to require: forwarded, and the 2.x server refuses it itself.
      stack.platform.reset();
      const absent = await postRpc(stack.mcpUrl, call(6), { key, headers });
      expect(absent.status).toBe(400);
      expect(absent.messages).toEqual([expect.objectContaining({ id: 6, error: expect.objectContaining({ code: -32020 }) })]);
      expect(absent.messages[0].error.data?.code).toBeUndefined();
      expect(stack.platform.requests).toHaveLength(1);
      expect(stack.platform.toolCalls).toEqual([]);
    });

    it('a gateway that has not relayed a tools/list refuses Mcp-Param-* until the tools are listed through it', async () => {
      // What the gateway learnt is its process's own: a second gateway in front of the same platform starts knowing nothing.
      const fresh = await startGateway({ UPSTREAM_URL: stack.platform.url, LOG_LEVEL: 'warn' });
      try {
        const admin = await loginAdmin(fresh.url);
        const created = await createKey(fresh.url, admin, { name: 'fresh gateway', scopes: ['mcp:agents'] });
        expect(created.status).toBe(201);
        const freshKey = created.body.key as string;
        const mcpUrl = `${fresh.url}/mcp`;
        const call = modern('tools/call', { name: 'get_agent_status', arguments: { agent_id: 2 } }, 7);
        const headers = { ...mirrorsOf('tools/call', 'get_agent_status'), 'mcp-param-agent-id': '2' };

        const unseen = await postRpc(mcpUrl, call, { key: freshKey, headers });
        expect(unseen.status).toBe(400);
        expect(unseen.messages).toEqual([headerMismatch(7, /has not seen the schema of get_agent_status.*tools\/list/)]);
        expect(stack.platform.requests).toEqual([]);

        // What a 2.x client does on -32020: list the tools again and retry.
        expect((await postRpc(mcpUrl, modern('tools/list', {}, 8), { key: freshKey, headers: mirrorsOf('tools/list') })).status).toBe(200);
        const retried = await postRpc(mcpUrl, call, { key: freshKey, headers });
        expect(retried.status).toBe(200);
        expect(stack.platform.toolCalls).toEqual([expect.objectContaining({ tool: 'get_agent_status', headers: expect.objectContaining({ 'mcp-param-agent-id': '2' }) })]);
      } finally {
        await fresh.stop();
      }
    });
  }

  if (sdk === 'v1') {
    it('a 2.x client pinned to 2026-07-28 cannot connect: the 1.x server does not offer that revision', async () => {
      const mode = CLIENT_MODES.find(pinned)!;
      await expect(connectAs(mode, urls, key)).rejects.toMatchObject({ code: 'ERA_NEGOTIATION_FAILED' });
      expect(stack.platform.toolCalls).toEqual([]);
    });
  }
});
