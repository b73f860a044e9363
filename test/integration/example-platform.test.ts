import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_TOOL_NAMES, startPlatform, type Platform } from '../../examples/platform/platform.ts';

// The example platform is the upstream of the demo, the end-to-end tests and the benchmark;
// here it is exercised directly with the SDK clients, no gateway in between, for both SDK
// generations of its MCP server (PlatformOptions.sdk).

const IDENTITY = { 'x-auth-kind': 'api_key', 'x-auth-key-id': '12', 'x-auth-agent-id': '7', 'x-auth-scopes': 'mcp:agents' };
const MCP_ACCEPT = 'application/json, text/event-stream';
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
};

function textOf(result: Awaited<ReturnType<Client['callTool']>>): unknown {
  const [first] = result.content as Array<{ type: string; text: string }>;
  return JSON.parse(first?.text ?? 'null');
}

describe('example platform: events, dashboard, test paths', () => {
  let platform: Platform;
  beforeAll(async () => {
    platform = await startPlatform({ port: 0, quiet: true });
  });
  afterAll(() => platform.close());
  afterEach(() => platform.reset());

  it('records a posted event with the identity headers and answers 202', async () => {
    const response = await fetch(`${platform.url}/api/v1/agents/7/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...IDENTITY },
      body: JSON.stringify({ type: 'call.started', call_id: 'c1' }),
    });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ accepted: true });
    expect(platform.events).toHaveLength(1);
    expect(platform.events[0]).toMatchObject({ agentId: '7', method: 'POST', body: { type: 'call.started', call_id: 'c1' } });
    expect(platform.events[0]?.headers).toMatchObject(IDENTITY);

    const listed = await fetch(`${platform.url}/api/v1/agents/7/events`);
    expect(listed.status).toBe(200);
    expect(await listed.json()).toMatchObject({ agent_id: '7', events: [{ body: { type: 'call.started' } }] });
    expect(platform.events).toHaveLength(1);
    expect(platform.requests.map((r) => r.method)).toEqual(['POST', 'GET']);
  });

  it('answers any other path with the identity headers echoed', async () => {
    const response = await fetch(`${platform.url}/dashboard/settings?tab=1`, { headers: IDENTITY });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ ok: true, method: 'GET', path: '/dashboard/settings?tab=1', identity: IDENTITY });

    const html = await fetch(`${platform.url}/dashboard`, { headers: { accept: 'text/html', ...IDENTITY } });
    expect(html.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await html.text()).toContain('x-auth-key-id');
  });

  it('streams three events on /sse/ and holds /slow/ back', async () => {
    const stream = await fetch(`${platform.url}/sse/feed`);
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    expect(await stream.text()).toBe('data: event 0\n\ndata: event 1\n\ndata: event 2\n\n');

    await expect(fetch(`${platform.url}/slow/x`, { signal: AbortSignal.timeout(300) })).rejects.toThrow();
    expect(platform.requests.map((r) => r.url)).toEqual(['/sse/feed', '/slow/x']);
  });
});

const STREAMABLE_MODES = [
  { sseMode: 'json', stateful: false },
  { sseMode: 'sse', stateful: false },
  { sseMode: 'json', stateful: true },
  { sseMode: 'sse', stateful: true },
] as const;

/** The 1.x SDK client (the 2025 era) against either SDK generation of the platform. */
const SDK_MODES = (['v1', 'v2'] as const).flatMap((sdk) => STREAMABLE_MODES.map((mode) => ({ sdk, ...mode })));

describe.each(SDK_MODES)('example platform ($sdk SDK): MCP over Streamable HTTP, $sseMode responses, stateful $stateful', ({ sdk, sseMode, stateful }) => {
  let platform: Platform;
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  beforeAll(async () => {
    platform = await startPlatform({ port: 0, quiet: true, sdk, sseMode, stateful });
    client = new Client({ name: 'example-platform-test', version: '1.0.0' });
    transport = new StreamableHTTPClientTransport(new URL(platform.mcpUrl), { requestInit: { headers: IDENTITY } });
    await client.connect(transport);
  });
  afterAll(async () => {
    await client.close();
    await platform.close();
  });

  it('lists the nine tools', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([...PLATFORM_TOOL_NAMES].sort());
    // `.meta()` carries x-mcp-header into the JSON Schema of either SDK; only get_agent_status has it.
    expect(tools.find((tool) => tool.name === 'get_agent_status')?.inputSchema.properties).toMatchObject({ agent_id: { 'x-mcp-header': 'Agent-Id' } });
    expect(tools.find((tool) => tool.name === 'place_outbound_call')?.inputSchema.properties?.['agent_id']).not.toHaveProperty('x-mcp-header');
  });

  it('executes a tool call and records it with the request headers', async () => {
    const before = platform.toolCalls.length;
    const result = await client.callTool({ name: 'get_agent_status', arguments: { agent_id: 7 } });
    expect(textOf(result)).toMatchObject({ agent_id: 7, status: 'paused' });
    expect(platform.toolCalls.slice(before)).toEqual([
      expect.objectContaining({ tool: 'get_agent_status', arguments: { agent_id: 7 }, headers: expect.objectContaining(IDENTITY) }),
    ]);
    expect(platform.toolCalls.at(-1)?.sessionId).toBe(stateful ? transport.sessionId : undefined);
  });

  it('defaults agent_id to the bound agent of the identity headers', async () => {
    const result = await client.callTool({ name: 'place_outbound_call', arguments: { to: '+15550100' } });
    expect(textOf(result)).toMatchObject({ status: 'queued', agent_id: 7 });
  });

  it('never records an unknown tool', async () => {
    const before = platform.toolCalls.length;
    const call = client.callTool({ name: 'drop_database', arguments: {} });
    // 1.x answers with a tool error; 2.x with the JSON-RPC error -32602 the spec asks for.
    if (sdk === 'v1') expect((await call).isError).toBe(true);
    else await expect(call).rejects.toMatchObject({ code: -32602 });
    expect(platform.toolCalls).toHaveLength(before);
  });

  it(`gives a session id only when stateful, and answers in ${sseMode === 'json' ? 'application/json' : 'text/event-stream'}`, async () => {
    expect(transport.sessionId === undefined).toBe(!stateful);
    const response = await fetch(platform.mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: MCP_ACCEPT },
      body: JSON.stringify(INITIALIZE),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe(sseMode === 'json' ? 'application/json' : 'text/event-stream');
    expect(response.headers.has('mcp-session-id')).toBe(stateful);
    expect(await response.text()).toContain('example-agent-platform');
  });

  it('refuses a POST that does not accept both JSON and SSE (406), as the SDK requires', async () => {
    const response = await fetch(platform.mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(INITIALIZE),
    });
    expect(response.status).toBe(406);
    await response.body?.cancel();
  });
});

describe.each(['v1', 'v2'] as const)('example platform (%s SDK): MCP over Streamable HTTP, session handling', (sdk) => {
  let platform: Platform;
  beforeAll(async () => {
    platform = await startPlatform({ port: 0, quiet: true, sdk, stateful: true });
  });
  afterAll(() => platform.close());

  it('answers 404 to an unknown session id and 400 to a non-initialize request without one', async () => {
    const call = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    const headers = { 'content-type': 'application/json', accept: MCP_ACCEPT };
    const unknown = await fetch(platform.mcpUrl, { method: 'POST', headers: { ...headers, 'mcp-session-id': 'nope' }, body: JSON.stringify(call) });
    expect(unknown.status).toBe(404);
    const missing = await fetch(platform.mcpUrl, { method: 'POST', headers, body: JSON.stringify(call) });
    expect(missing.status).toBe(400);
    const garbage = await fetch(platform.mcpUrl, { method: 'POST', headers, body: '{not json' });
    expect(garbage.status).toBe(400);
    expect(await garbage.json()).toMatchObject({ error: { code: -32700 } });
  });

  it('ends a session on DELETE', async () => {
    const client = new Client({ name: 'example-platform-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(platform.mcpUrl));
    await client.connect(transport);
    const sessionId = transport.sessionId;
    await transport.terminateSession();
    await client.close();
    const after = await fetch(platform.mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: MCP_ACCEPT, 'mcp-session-id': sessionId ?? '' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
    });
    expect(after.status).toBe(404);
  });
});

describe('example platform: legacy HTTP+SSE transport', () => {
  let platform: Platform;
  beforeAll(async () => {
    platform = await startPlatform({ port: 0, quiet: true, legacySsePath: '/legacy/sse', legacyMessagesPath: '/legacy/messages' });
  });
  afterAll(() => platform.close());

  it('lists and calls tools over the stream, recording the call with its session id', async () => {
    const client = new Client({ name: 'example-platform-test', version: '1.0.0' });
    const transport = new SSEClientTransport(new URL(`${platform.url}/legacy/sse`), { requestInit: { headers: IDENTITY } });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools).toHaveLength(PLATFORM_TOOL_NAMES.length);
      const result = await client.callTool({ name: 'search_knowledge_base', arguments: { query: 'opening hours' } });
      expect(textOf(result)).toMatchObject({ query: 'opening hours' });
      const stream = platform.requests.find((r) => r.url === '/legacy/sse');
      expect(stream?.headers['x-auth-key-id']).toBe('12');
      // The client does not expose the session id; the URLs it posted to carry it.
      const posted = platform.requests.filter((r) => r.method === 'POST').map((r) => new URL(r.url, platform.url));
      expect(posted.every((url) => url.pathname === '/legacy/messages')).toBe(true);
      const sessionId = posted[0]?.searchParams.get('sessionId');
      expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
      expect(platform.toolCalls).toEqual([
        expect.objectContaining({ tool: 'search_knowledge_base', sessionId, headers: expect.objectContaining(IDENTITY) }),
      ]);
    } finally {
      await client.close();
    }
  });

  it('answers 404 to a message for an unknown session', async () => {
    const response = await fetch(`${platform.url}/legacy/messages?sessionId=nope`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(response.status).toBe(404);
  });
});

/** A tools/list entry as both SDK generations should agree on it: each SDK names its own JSON Schema dialect (`$schema`). */
function comparable(tool: { name: string; description?: string | undefined; inputSchema: Record<string, unknown> }) {
  const { $schema: _dialect, ...inputSchema } = tool.inputSchema;
  return { name: tool.name, description: tool.description, inputSchema };
}

describe.each([
  { mode: 'auto', stateful: true },
  { mode: 'auto', stateful: false },
  { mode: { pin: '2026-07-28' }, stateful: true },
] as const)('example platform (v2 SDK): the 2026-07-28 era on the same path, versionNegotiation $mode, stateful $stateful', ({ mode, stateful }) => {
  let platform: Platform;
  let reference: Platform;
  let client: V2Client;
  beforeAll(async () => {
    [platform, reference] = await Promise.all([startPlatform({ quiet: true, sdk: 'v2', stateful }), startPlatform({ quiet: true })]);
    client = new V2Client({ name: 'example-platform-test', version: '1.0.0' }, { versionNegotiation: { mode } });
    await client.connect(new V2StreamableHTTPClientTransport(new URL(platform.mcpUrl), { requestInit: { headers: IDENTITY } }));
  });
  afterAll(async () => {
    await client.close();
    await Promise.all([platform.close(), reference.close()]);
  });

  it('negotiates the modern era with server/discover, no session', () => {
    expect(client.getProtocolEra()).toBe('modern');
    const probe = platform.requests.find((request) => request.body.includes('"server/discover"'));
    expect(probe?.headers['mcp-protocol-version']).toBe('2026-07-28');
    expect(platform.requests.some((request) => request.body.includes('"initialize"'))).toBe(false);
  });

  it('lists the nine tools with the schemas of the v1 SDK platform', async () => {
    const v1 = new Client({ name: 'example-platform-test', version: '1.0.0' });
    await v1.connect(new StreamableHTTPClientTransport(new URL(reference.mcpUrl)));
    const expected = (await v1.listTools()).tools.map(comparable);
    await v1.close();
    const { tools } = await client.listTools();
    expect(tools.map(comparable)).toEqual(expected);
  });

  it('executes a tool call and records it with the request headers, and no session id', async () => {
    platform.reset();
    const result = await client.callTool({ name: 'place_outbound_call', arguments: { to: '+15550100' } });
    expect(JSON.parse((result.content as Array<{ text: string }>)[0]!.text)).toMatchObject({ status: 'queued', agent_id: 7 });
    expect(platform.toolCalls).toEqual([
      expect.objectContaining({ tool: 'place_outbound_call', arguments: { to: '+15550100' }, headers: expect.objectContaining(IDENTITY) }),
    ]);
    expect(platform.toolCalls[0]).not.toHaveProperty('sessionId');
    // The 2026-07-28 mirror headers travel with the call.
    expect(platform.toolCalls[0]!.headers).toMatchObject({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'place_outbound_call' });
  });

  it('answers an unknown tool with -32602 and records nothing', async () => {
    platform.reset();
    await expect(client.callTool({ name: 'drop_database', arguments: {} })).rejects.toMatchObject({ code: -32602 });
    expect(platform.toolCalls).toEqual([]);
  });
});

describe('example platform: SDK generations that do not meet', () => {
  it('a client pinned to 2026-07-28 cannot connect to the v1 SDK platform; in auto mode it falls back to initialize', async () => {
    const platform = await startPlatform({ quiet: true });
    try {
      const pinned = new V2Client({ name: 'example-platform-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
      await expect(pinned.connect(new V2StreamableHTTPClientTransport(new URL(platform.mcpUrl)))).rejects.toMatchObject({ code: 'ERA_NEGOTIATION_FAILED' });
      const auto = new V2Client({ name: 'example-platform-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
      await auto.connect(new V2StreamableHTTPClientTransport(new URL(platform.mcpUrl)));
      expect(auto.getProtocolEra()).toBe('legacy');
      expect((await auto.listTools()).tools).toHaveLength(PLATFORM_TOOL_NAMES.length);
      await auto.close();
    } finally {
      await platform.close();
    }
  });

  it('the v2 SDK serves no legacy HTTP+SSE transport', async () => {
    await expect(startPlatform({ quiet: true, sdk: 'v2', legacySsePath: '/sse', legacyMessagesPath: '/messages' })).rejects.toThrow(/sdk: v1/);
  });
});
