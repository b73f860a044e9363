import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { until } from '../support/until.ts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../support/http.ts';
import { connectLegacyClient, postRpc, refusalOf, startMcpStack, toolCall, type McpStack } from '../support/mcp.ts';

// The legacy HTTP+SSE transport (MCP_SSE_PATH, MCP_MESSAGES_PATH) with the SDK's
// SSEClientTransport, through the gateway, to the platform's SDK SSEServerTransport.

const LEGACY = { MCP_SSE_PATH: '/sse', MCP_MESSAGES_PATH: '/messages' };

describe('the legacy HTTP+SSE transport, inspected like MCP_PATH', () => {
  let stack: McpStack;
  let agents: string;
  let agentsId: number;
  let everything: string;
  const clients: Client[] = [];
  const connect = async (key: string) => {
    const { client } = await connectLegacyClient(`${stack.gateway.url}/sse`, key);
    clients.push(client);
    return client;
  };
  /** The session id the platform saw for the first tool call (the legacy client does not expose its own). */
  const sessionOfFirstCall = () => stack.platform.toolCalls[0]!.sessionId!;

  beforeAll(async () => {
    stack = await startMcpStack({ legacySsePath: '/sse', legacyMessagesPath: '/messages' }, LEGACY);
    ({ key: agents, id: agentsId } = await stack.key(['mcp:agents']));
    everything = (await stack.key(['mcp:tools', 'mcp:agents', 'mcp:events'])).key;
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
    stack.platform.reset();
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('lists only the allowed tools (filtered on the stream) and runs the allowed ones', async () => {
    const client = await connect(agents);
    expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(['get_agent_status', 'list_agents']);
    await client.callTool({ name: 'list_agents', arguments: {} });
    expect(stack.platform.toolCalls.map((call) => call.tool)).toEqual(['list_agents']);
    expect(stack.platform.toolCalls[0]!.headers['x-auth-key-id']).toBe(String(agentsId));
  });

  it('refuses a tool outside the key\'s scopes with 403 and a JSON-RPC error; it never runs', async () => {
    const client = await connect(agents);
    const refusal = await refusalOf(client.callTool({ name: 'place_outbound_call', arguments: { to: '+15550100' } }));
    expect(refusal.status).toBe(403);
    expect(refusal.body).toMatchObject({ jsonrpc: '2.0', error: { data: { code: 'insufficient_scope', scope: 'mcp:calls' } } });
    // Its server would answer on the stream: the POST's refusal is an HTTP error, so that the client sees it at all.
    const unknown = await refusalOf(client.callTool({ name: 'drop_database', arguments: {} }));
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: -32602, data: { code: 'unknown_tool' } });
    expect(stack.platform.toolCalls).toEqual([]);
  });

  it('another key posting to the session is refused with 403 session_mismatch; nothing runs', async () => {
    const client = await connect(agents);
    await client.callTool({ name: 'list_agents', arguments: {} });
    const sessionId = sessionOfFirstCall();
    stack.platform.reset();

    const hijack = await postRpc(`${stack.gateway.url}/messages?sessionId=${encodeURIComponent(sessionId)}`, toolCall('place_outbound_call', { to: '+15550100' }), { key: everything });
    expect(hijack.status).toBe(403);
    expect(hijack.messages[0]).toMatchObject({ id: 1, error: { data: { code: 'session_mismatch' } } });
    expect(stack.platform.requests).toEqual([]);
    expect(stack.platform.toolCalls).toEqual([]);
  });

  it('messages need exactly one sessionId, of a stream opened through the gateway', async () => {
    const client = await connect(agents);
    await client.callTool({ name: 'list_agents', arguments: {} });
    const sessionId = sessionOfFirstCall();
    stack.platform.reset();
    const cases: Array<[string, number, string]> = [
      ['', 400, 'validation_failed'],
      [`?sessionId=${sessionId}&sessionId=other`, 400, 'validation_failed'],
      [`?sessionId=${sessionId}&session%49d=other`, 400, 'validation_failed'],
      ['?sessionId=4a1f0000-0000-4000-8000-000000000000', 404, 'not_found'],
    ];
    for (const [query, status, code] of cases) {
      const response = await postRpc(`${stack.gateway.url}/messages${query}`, toolCall('list_agents'), { key: agents });
      expect(response.status, query).toBe(status);
      expect(response.messages[0].error.data.code, query).toBe(code);
    }
    expect(stack.platform.requests).toEqual([]);
  });

  it('the binding ends with the stream: once the client has gone, its session id is refused', async () => {
    const client = await connect(agents);
    await client.callTool({ name: 'list_agents', arguments: {} });
    const sessionId = sessionOfFirstCall();
    await client.close();
    clients.splice(clients.indexOf(client), 1);
    stack.platform.reset();
    // Refused once the gateway has seen the stream close (polled, not slept on).
    await until(async () => (await postRpc(`${stack.gateway.url}/messages?sessionId=${sessionId}`, toolCall('list_agents'), { key: agents })).status === 404, 'the ended session to be refused');
    // (Until the gateway has seen the stream close, the owner's own posts may still pass: the session is still its.)
    stack.platform.reset();
    expect((await postRpc(`${stack.gateway.url}/messages?sessionId=${sessionId}`, toolCall('list_agents'), { key: everything })).status).toBe(404);
    expect(stack.platform.requests).toEqual([]);
  });

  it('the stream and the messages need an MCP scope; an admin token is not enough', async () => {
    const eventsOnly = (await stack.key(['events:write'])).key;
    const refusal = await refusalOf(connectLegacyClient(`${stack.gateway.url}/sse`, eventsOnly));
    expect(refusal.status).toBe(403);
    const admin = await request(`${stack.gateway.url}/sse`, { token: stack.admin });
    expect(admin.status).toBe(401);
    expect(stack.platform.requests).toEqual([]);
  });

  it('Streamable HTTP on MCP_PATH is served alongside', async () => {
    const response = await postRpc(`${stack.gateway.url}/mcp`, toolCall('place_outbound_call', { to: '+15550100' }), { key: agents });
    expect(response.status).toBe(403);
    expect(stack.platform.requests).toEqual([]);
  });
});

describe('the legacy transport is off unless both paths are set', () => {
  let stack: McpStack;
  beforeAll(async () => {
    stack = await startMcpStack({ legacySsePath: '/sse', legacyMessagesPath: '/messages' });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('its paths are then admin routes: an API key is refused and nothing reaches the tool server', async () => {
    const { key } = await stack.key(['mcp:tools', 'mcp:agents']);
    const refusal = await refusalOf(connectLegacyClient(`${stack.gateway.url}/sse`, key));
    expect(refusal.status).toBe(401);
    const posted = await postRpc(`${stack.gateway.url}/messages?sessionId=x`, toolCall('list_agents'), { key });
    expect(posted.status).toBe(401);
    expect(stack.platform.requests).toEqual([]);
    expect(stack.platform.toolCalls).toEqual([]);
  });
});
