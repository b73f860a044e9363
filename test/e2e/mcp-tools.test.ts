import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_TOOL_NAMES } from '../../examples/platform/platform.ts';
import { request } from '../support/http.ts';
import { connectClient, refusalOf, startMcpStack, type McpStack } from '../support/mcp.ts';

// The official MCP SDK client, through the spawned gateway, to the example platform's SDK
// McpServer with the nine tools. What ran is asserted on the platform's own record of
// executions (`platform.toolCalls`), never on what the gateway says.

/** A plausible argument set for each tool, so that an allowed call succeeds on the server. */
const ARGUMENTS: Record<string, Record<string, unknown>> = {
  place_outbound_call: { to: '+15550100' },
  search_knowledge_base: { query: 'opening hours' },
  fetch_call_transcript: { call_id: 'call_0001' },
  list_agents: {},
  get_agent_status: {},
  record_event: { type: 'call.started' },
  lookup_end_user: { phone: '+15550101' },
  call_custom_tool: { name: 'crm_sync' },
  delegate_task_to_orchestrator: { task: 'follow up' },
};

const SCOPE_OF: Record<string, string> = {
  place_outbound_call: 'mcp:calls',
  search_knowledge_base: 'mcp:knowledge',
  fetch_call_transcript: 'mcp:transcripts',
  list_agents: 'mcp:agents',
  get_agent_status: 'mcp:agents',
  record_event: 'mcp:events',
  lookup_end_user: 'mcp:recall',
  call_custom_tool: 'mcp:custom_tools',
  delegate_task_to_orchestrator: 'mcp:orchestrate',
};

const MODES = [
  { sseMode: 'json', stateful: true },
  { sseMode: 'sse', stateful: true },
  { sseMode: 'json', stateful: false },
  { sseMode: 'sse', stateful: false },
] as const;

describe.each(MODES)('MCP through the gateway with the SDK client: $sseMode responses, stateful $stateful', ({ sseMode, stateful }) => {
  let stack: McpStack;
  const clients: Client[] = [];
  const connect = async (key: string) => {
    const { client, transport } = await connectClient(stack.mcpUrl, key);
    clients.push(client);
    return Object.assign(client, { sessionId: transport.sessionId });
  };

  beforeAll(async () => {
    // events and recall licensed; custom_tools and orchestrate not.
    stack = await startMcpStack({ sseMode, stateful }, { LICENSE_FEATURES: 'events,recall' });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
    stack.platform.reset();
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('a key with mcp:agents sees exactly list_agents and get_agent_status, and both run on the server', async () => {
    const { key, id } = await stack.key(['mcp:agents']);
    const client = await connect(key);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['get_agent_status', 'list_agents']);
    // The schemas come through untouched.
    expect(tools.find((tool) => tool.name === 'list_agents')?.inputSchema).toMatchObject({ type: 'object' });

    const listed = await client.callTool({ name: 'list_agents', arguments: {} });
    expect(listed.isError).toBeFalsy();
    expect(JSON.parse((listed.content as Array<{ text: string }>)[0]!.text)).toMatchObject({ agents: expect.any(Array) });
    await client.callTool({ name: 'get_agent_status', arguments: { agent_id: 2 } });

    expect(stack.platform.toolCalls.map((call) => call.tool)).toEqual(['list_agents', 'get_agent_status']);
    const [first] = stack.platform.toolCalls;
    expect(first!.headers).toMatchObject({ 'x-auth-kind': 'api_key', 'x-auth-key-id': String(id), 'x-auth-scopes': 'mcp:agents' });
    expect(first!.headers.authorization).toBeUndefined();
    if (stateful) expect(first!.sessionId).toEqual(expect.any(String));
  });

  it('every other tool is refused with 403 insufficient_scope naming its scope, and never runs', async () => {
    const { key } = await stack.key(['mcp:agents']);
    const client = await connect(key);
    for (const tool of PLATFORM_TOOL_NAMES.filter((name) => SCOPE_OF[name] !== 'mcp:agents')) {
      const refusal = await refusalOf(client.callTool({ name: tool, arguments: ARGUMENTS[tool] }));
      expect(refusal.status, tool).toBe(403);
      expect(refusal.body, tool).toMatchObject({
        jsonrpc: '2.0',
        id: expect.any(Number),
        error: { code: -32003, data: { code: 'insufficient_scope', scope: SCOPE_OF[tool] } },
      });
    }
    expect(stack.platform.toolCalls).toEqual([]);
  });

  it('the 403 carries WWW-Authenticate insufficient_scope with the scope, and the JSON-RPC id of the call', async () => {
    const { key } = await stack.key(['mcp:agents']);
    const client = await connect(key);
    // A raw call on the client's own session, to see the HTTP answer itself.
    const { sessionId } = client;
    expect(sessionId !== undefined).toBe(stateful);
    const response = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
        ...(sessionId === undefined ? {} : { 'mcp-session-id': sessionId }),
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'call-42', method: 'tools/call', params: { name: 'place_outbound_call', arguments: ARGUMENTS.place_outbound_call } }),
    });
    expect(response.status).toBe(403);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="gatehouse", error="insufficient_scope", scope="mcp:calls"');
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toMatchObject({ jsonrpc: '2.0', id: 'call-42', error: { data: { code: 'insufficient_scope' } } });
    expect(stack.platform.toolCalls).toEqual([]);
    await client.listTools();
  });

  it('the legacy alias mcp:tools stands for mcp:calls, mcp:knowledge and mcp:transcripts', async () => {
    const { key } = await stack.key(['mcp:tools']);
    const client = await connect(key);
    expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(['fetch_call_transcript', 'place_outbound_call', 'search_knowledge_base']);
    for (const tool of ['place_outbound_call', 'search_knowledge_base', 'fetch_call_transcript']) {
      await client.callTool({ name: tool, arguments: ARGUMENTS[tool] });
    }
    const refusal = await refusalOf(client.callTool({ name: 'list_agents', arguments: {} }));
    expect(refusal.body.error.data).toMatchObject({ code: 'insufficient_scope', scope: 'mcp:agents' });
    expect(stack.platform.toolCalls.map((call) => call.tool)).toEqual(['place_outbound_call', 'search_knowledge_base', 'fetch_call_transcript']);
  });

  it('licensed features: a tool whose feature is on runs; one whose feature is off is hidden and refused', async () => {
    const { key } = await stack.key(['mcp:events', 'mcp:recall', 'mcp:custom_tools', 'mcp:orchestrate']);
    const client = await connect(key);
    expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(['lookup_end_user', 'record_event']);
    await client.callTool({ name: 'record_event', arguments: ARGUMENTS.record_event });
    await client.callTool({ name: 'lookup_end_user', arguments: ARGUMENTS.lookup_end_user });
    for (const tool of ['call_custom_tool', 'delegate_task_to_orchestrator']) {
      const refusal = await refusalOf(client.callTool({ name: tool, arguments: ARGUMENTS[tool] }));
      expect(refusal.status, tool).toBe(403);
      expect(refusal.body.error.data.code, tool).toBe('feature_not_licensed');
    }
    expect(stack.platform.toolCalls.map((call) => call.tool)).toEqual(['record_event', 'lookup_end_user']);
  });

  it('a tool not in the table is answered as a tool server answers an unknown tool (-32602), whatever the key holds', async () => {
    const { key } = await stack.key(['mcp:calls', 'mcp:knowledge', 'mcp:transcripts', 'mcp:agents', 'mcp:events', 'mcp:recall', 'mcp:tools']);
    const client = await connect(key);
    for (const name of ['drop_database', 'List_Agents', 'list_agents ', '__proto__']) {
      const refusal = await client.callTool({ name, arguments: {} }).then(
        () => undefined,
        (error: unknown) => error,
      );
      // A JSON-RPC error in a 200, as the SDK's own server answers: the client raises it as a protocol error, not an HTTP one.
      expect(refusal, name).toMatchObject({ code: -32602, data: { code: 'unknown_tool', status: 200 } });
    }
    expect(stack.platform.toolCalls).toEqual([]);
    expect(stack.platform.requests.some((request) => request.body.includes('drop_database'))).toBe(false);
  });

  it('a key bound to agent 7 acts for agent 7 only: arguments.agent_id naming another agent is refused', async () => {
    const { key } = await stack.key(['mcp:agents', 'mcp:calls'], 7);
    const client = await connect(key);
    await client.callTool({ name: 'get_agent_status', arguments: { agent_id: 7 } });
    await client.callTool({ name: 'get_agent_status', arguments: {} });
    for (const [tool, args] of [
      ['get_agent_status', { agent_id: 8 }],
      ['place_outbound_call', { to: '+15550100', agent_id: 1 }],
    ] as const) {
      const refusal = await refusalOf(client.callTool({ name: tool, arguments: args }));
      expect(refusal.status).toBe(403);
      expect(refusal.body.error.data.code).toBe('agent_mismatch');
    }
    expect(stack.platform.toolCalls.map((call) => call.arguments)).toEqual([{ agent_id: 7 }, {}]);
    expect(stack.platform.toolCalls[1]!.headers['x-auth-agent-id']).toBe('7');
  });

  it('a key without any mcp: scope cannot even initialize (403 problem+json listing the MCP scopes)', async () => {
    const { key } = await stack.key(['events:write']);
    const refusal = await refusalOf(connectClient(stack.mcpUrl, key));
    expect(refusal.status).toBe(403);
    expect(refusal.body).toMatchObject({ code: 'insufficient_scope', status: 403 });
    expect(stack.platform.requests).toEqual([]);
  });

  it('an admin token is not an MCP credential', async () => {
    const response = await request(stack.mcpUrl, { method: 'POST', token: stack.admin, json: { jsonrpc: '2.0', id: 1, method: 'ping' } });
    expect(response.status).toBe(401);
    expect(response.body.code).toBe('wrong_credential_type');
    expect(stack.platform.requests).toEqual([]);
  });
});
