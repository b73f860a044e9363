import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.ts';
import { MCP_ACCEPT, initialize, postRpc, startMcpStack, toolCall, type McpStack } from '../support/mcp.ts';

// What the gateway checks of each MCP protocol revision (docs/mcp.md, "Protocol revisions"),
// with raw HTTP through a spawned gateway to the example platform on the 2.x SDK, which
// speaks every revision from 2024-11-05's handshake to 2026-07-28. What got through is read
// from the platform's own record of the requests it received.

const MODERN = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } };

/** A request of the stateless revision: its version in `_meta`, as its clients send it. */
const modern = (method: string, params: Record<string, unknown> = {}, id = 1) => ({ jsonrpc: '2.0', id, method, params: { ...params, _meta: META } });

/** The headers a 2026-07-28 client sends with `message`. */
function mirrorsOf(method: string, name?: string): Record<string, string> {
  return { 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(name === undefined ? {} : { 'mcp-name': name }) };
}

describe('MCP protocol revisions through the gateway', () => {
  let stack: McpStack;
  let agents: string;
  const received = () => stack.platform.requests.map((request) => request.body);
  const refusalLines = () =>
    stack.gateway
      .output()
      .split('\n')
      .filter((line) => line.includes('"request refused"'))
      .map((line) => JSON.parse(line) as { code: string; status: number; reqId: string });

  beforeAll(async () => {
    stack = await startMcpStack({ sdk: 'v2', stateful: false }, { LOG_LEVEL: 'info', MCP_ALLOWED_ORIGINS: 'https://console.example' });
    agents = (await stack.key(['mcp:agents'])).key;
  });
  afterEach(() => stack.platform.reset());
  afterAll(async () => {
    await stack?.close();
  });

  it.each([
    ['2024-11-05', initialize()],
    ['2025-03-26', initialize()],
    ['2025-06-18', initialize()],
    ['2025-11-25', initialize()],
    [MODERN, modern('server/discover')],
  ])('%s: a client connects with a key holding any mcp: scope (the connection methods are always open)', async (version, message) => {
    const body = version === MODERN ? message : { ...message, params: { ...(message as ReturnType<typeof initialize>).params, protocolVersion: version } };
    const headers = version === MODERN ? mirrorsOf('server/discover') : { 'mcp-protocol-version': version };
    const response = await postRpc(stack.mcpUrl, body, { key: agents, headers });
    expect(response.status).toBe(200);
    expect(response.messages[0]).toMatchObject({ jsonrpc: '2.0', id: (body as { id: number }).id, result: expect.any(Object) });
    expect(received()).toHaveLength(1);
  });

  it.each([
    ['garbage', 'garbage'],
    ['a date that is no revision', '1999-01-01'],
  ])('MCP-Protocol-Version %s: 400 unsupported_protocol_version, listing the revisions; nothing forwarded, one line logged', async (_, version) => {
    const response = await postRpc(stack.mcpUrl, toolCall('list_agents'), { key: agents, headers: { 'mcp-protocol-version': version } });
    expect(response.status).toBe(400);
    expect(response.messages[0]).toMatchObject({
      id: 1,
      error: { code: -32022, data: { code: 'unsupported_protocol_version', requested: version, supported: [MODERN] } },
    });
    expect(received()).toEqual([]);
    // The line reaches the process's stdout on its own time: wait for it, not for a fixed while.
    await expect.poll(() => refusalLines().filter((line) => line.code === 'unsupported_protocol_version').length).toBeGreaterThan(0);
  });

  it('two MCP-Protocol-Version headers, even equal: 400 unsupported_protocol_version, nothing forwarded', async () => {
    const body = JSON.stringify(toolCall('list_agents'));
    const response = await rawRequest(
      Number(new URL(stack.gateway.url).port),
      `POST /mcp HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${agents}\r\nContent-Type: application/json\r\nAccept: ${MCP_ACCEPT}\r\n` +
        `MCP-Protocol-Version: 2025-06-18\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ error: { code: -32022, data: { code: 'unsupported_protocol_version' } } });
    expect(received()).toEqual([]);
  });

  it('headers that agree with the body are forwarded as they came', async () => {
    const response = await postRpc(stack.mcpUrl, modern('tools/call', { name: 'list_agents', arguments: {} }), { key: agents, headers: mirrorsOf('tools/call', 'list_agents') });
    expect(response.status).toBe(200);
    expect(response.messages[0]).toMatchObject({ id: 1, result: { content: [{ type: 'text' }] } });
    expect(stack.platform.toolCalls.map((call) => call.tool)).toEqual(['list_agents']);
    expect(stack.platform.requests[0]!.headers).toMatchObject({ 'mcp-method': 'tools/call', 'mcp-name': 'list_agents', 'mcp-protocol-version': MODERN });
  });

  it.each([
    ['Mcp-Name naming a tool the key may not call', mirrorsOf('tools/call', 'place_outbound_call')],
    ['Mcp-Method naming another method', mirrorsOf('tools/list', 'list_agents')],
    ['Mcp-Name in the Base64 sentinel, naming another tool', mirrorsOf('tools/call', `=?base64?${Buffer.from('place_outbound_call').toString('base64')}?=`)],
    ['an MCP-Protocol-Version the body’s _meta does not say', { ...mirrorsOf('tools/call', 'list_agents'), 'mcp-protocol-version': '2025-11-25' }],
  ])('%s: 400 header_mismatch (-32020), nothing forwarded', async (_, headers) => {
    const response = await postRpc(stack.mcpUrl, modern('tools/call', { name: 'list_agents', arguments: {} }), { key: agents, headers });
    expect(response.status).toBe(400);
    expect(response.messages[0]).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32020, data: { code: 'header_mismatch', status: 400 } } });
    expect(response.headers.get('www-authenticate')).toBeNull();
    expect(received()).toEqual([]);
  });

  it('two Mcp-Name headers, even naming the body’s tool, are refused rather than merged; nothing forwarded', async () => {
    const body = JSON.stringify(modern('tools/call', { name: 'list_agents', arguments: {} }));
    const response = await rawRequest(
      Number(new URL(stack.gateway.url).port),
      `POST /mcp HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${agents}\r\nContent-Type: application/json\r\nAccept: ${MCP_ACCEPT}\r\n` +
        `MCP-Protocol-Version: ${MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: list_agents\r\nMcp-Name: place_outbound_call\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ id: 1, error: { code: -32020, data: { code: 'header_mismatch' } } });
    expect(received()).toEqual([]);
  });

  it('an unknown tool is answered as a tool server answers it: -32602 in a 200, no challenge; nothing forwarded', async () => {
    for (const [message, headers] of [
      [toolCall('drop_database'), { 'mcp-protocol-version': '2025-11-25' }],
      [modern('tools/call', { name: 'drop_database', arguments: {} }), mirrorsOf('tools/call', 'drop_database')],
    ] as const) {
      const response = await postRpc(stack.mcpUrl, message, { key: agents, headers });
      expect(response.status).toBe(200);
      expect(response.headers.get('www-authenticate')).toBeNull();
      expect(response.messages[0]).toMatchObject({ id: 1, error: { code: -32602, data: { code: 'unknown_tool' } } });
    }
    expect(received()).toEqual([]);
  });

  it('a method the table does not open: -32601, a 404 in the stateless revision and a 200 before it; nothing forwarded', async () => {
    const legacy = await postRpc(stack.mcpUrl, { jsonrpc: '2.0', id: 4, method: 'resources/list' }, { key: agents, headers: { 'mcp-protocol-version': '2025-11-25' } });
    expect(legacy.status).toBe(200);
    expect(legacy.messages[0]).toMatchObject({ id: 4, error: { code: -32601, data: { code: 'method_not_found' } } });
    const stateless = await postRpc(stack.mcpUrl, modern('resources/list', {}, 5), { key: agents, headers: mirrorsOf('resources/list') });
    expect(stateless.status).toBe(404);
    expect(stateless.messages[0]).toMatchObject({ id: 5, error: { code: -32601, data: { code: 'method_not_found' } } });
    expect(received()).toEqual([]);
  });

  it('a tool a scope would allow keeps its 403 insufficient_scope naming that scope', async () => {
    const response = await postRpc(stack.mcpUrl, modern('tools/call', { name: 'place_outbound_call', arguments: { to: '+15550100' } }), {
      key: agents,
      headers: mirrorsOf('tools/call', 'place_outbound_call'),
    });
    expect(response.status).toBe(403);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="gatehouse", error="insufficient_scope", scope="mcp:calls"');
    expect(response.messages[0]).toMatchObject({ id: 1, error: { data: { code: 'insufficient_scope', scope: 'mcp:calls' } } });
    expect(received()).toEqual([]);
  });

  it('an Origin MCP_ALLOWED_ORIGINS does not list: 403 origin_not_allowed, before the key is looked at; a listed one passes', async () => {
    for (const key of [agents, 'gh_not_a_key']) {
      const response = await postRpc(stack.mcpUrl, toolCall('list_agents'), { key, headers: { origin: 'https://evil.example' } });
      expect(response.status).toBe(403);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(response.headers.get('www-authenticate')).toBeNull();
      expect(JSON.parse(response.text)).toMatchObject({ code: 'origin_not_allowed', status: 403 });
    }
    expect(received()).toEqual([]);
    const listed = await postRpc(stack.mcpUrl, toolCall('list_agents'), { key: agents, headers: { origin: 'https://console.example', 'mcp-protocol-version': '2025-11-25' } });
    expect(listed.status).toBe(200);
    expect(stack.platform.toolCalls.map((call) => call.tool)).toEqual(['list_agents']);
  });

  it('a filtered tools/list of the stateless revision is marked private to the key that asked', async () => {
    const response = await postRpc(stack.mcpUrl, modern('tools/list'), { key: agents, headers: mirrorsOf('tools/list') });
    expect(response.status).toBe(200);
    const { result } = response.messages[0];
    expect(result.tools.map((tool: { name: string }) => tool.name).sort()).toEqual(['get_agent_status', 'list_agents']);
    expect(result.cacheScope).toBe('private');
  });

  it('every refusal above was logged as one request refused line, with its code and request id', async () => {
    const expected = ['unsupported_protocol_version', 'header_mismatch', 'unknown_tool', 'method_not_found', 'insufficient_scope', 'origin_not_allowed'];
    await expect.poll(() => expected.filter((code) => !refusalLines().some((line) => line.code === code))).toEqual([]);
    const lines = refusalLines();
    expect(lines.every((line) => typeof line.reqId === 'string' && line.reqId !== '')).toBe(true);
    // One line per refused request: no request id twice.
    expect(new Set(lines.map((line) => line.reqId)).size).toBe(lines.length);
  });
});
