import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { rawRequest } from '../support/raw-http.ts';
import { MCP_ACCEPT, PROTOCOL_VERSION, connectClient, openSession, postRpc, refusalOf, startMcpStack, toolCall, type McpStack } from '../support/mcp.ts';

// Stateful MCP sessions (Mcp-Session-Id) through the gateway: a session belongs to the key
// that initialized it. Executions are read from the platform's own record.

describe.each(['json', 'sse'] as const)('MCP sessions bound to their key: %s responses', (sseMode) => {
  let stack: McpStack;
  let owner: string;
  let ownerId: number;
  let intruder: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    stack = await startMcpStack({ sseMode, stateful: true });
    ({ key: owner, id: ownerId } = await stack.key(['mcp:agents']));
    // The intruder holds every scope: what stops it is the session, not its scopes.
    intruder = (await stack.key(['mcp:tools', 'mcp:agents'])).key;
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
    stack.platform.reset();
  });
  afterAll(async () => {
    await stack?.close();
  });

  async function ownerSession(): Promise<{ client: Client; sessionId: string }> {
    const { client, transport } = await connectClient(stack.mcpUrl, owner);
    clients.push(client);
    expect(transport.sessionId).toEqual(expect.any(String));
    const sessionId = transport.sessionId!;
    // Once initialized, the SDK opens the session's stream (a GET) in the background: let it
    // arrive, so that it is never taken for a request the test made later.
    await vi.waitFor(() => expect(stack.platform.requests.some((request) => request.method === 'GET' && request.headers['mcp-session-id'] === sessionId)).toBe(true));
    return { client, sessionId };
  }

  it('another key presenting the session id is refused with 403 session_mismatch, and nothing runs', async () => {
    const { client, sessionId } = await ownerSession();
    await client.callTool({ name: 'list_agents', arguments: {} });
    expect(stack.platform.toolCalls).toHaveLength(1);

    const hijack = await postRpc(stack.mcpUrl, toolCall('list_agents', {}, 7), { key: intruder, sessionId });
    expect(hijack.status).toBe(403);
    expect(hijack.headers.get('www-authenticate')).toMatch(/^Bearer .*error="insufficient_scope"/);
    expect(hijack.messages).toEqual([
      expect.objectContaining({ jsonrpc: '2.0', id: 7, error: expect.objectContaining({ data: expect.objectContaining({ code: 'session_mismatch' }) }) }),
    ]);
    expect(stack.platform.toolCalls).toHaveLength(1);

    // The owner's session goes on.
    await client.callTool({ name: 'get_agent_status', arguments: {} });
    expect(stack.platform.toolCalls.map((call) => [call.tool, call.sessionId, call.headers['x-auth-key-id']])).toEqual([
      ['list_agents', sessionId, String(ownerId)],
      ['get_agent_status', sessionId, String(ownerId)],
    ]);
  });

  it('the SDK client of another key, given the session id, cannot use it either', async () => {
    const { sessionId } = await ownerSession();
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const transport = new StreamableHTTPClientTransport(new URL(stack.mcpUrl), { sessionId, requestInit: { headers: { authorization: `Bearer ${intruder}` } } });
    await transport.start();
    const refusal = await refusalOf(transport.send(toolCall('place_outbound_call', { to: '+15550100' }, 1) as never));
    expect(refusal.status).toBe(403);
    expect(refusal.body.error.data.code).toBe('session_mismatch');
    await transport.close();
    expect(stack.platform.toolCalls).toEqual([]);
  });

  it('another key can neither open the session\'s stream nor end it', async () => {
    const { client, sessionId } = await ownerSession();
    for (const method of ['GET', 'DELETE']) {
      const response = await fetch(stack.mcpUrl, {
        method,
        headers: { authorization: `Bearer ${intruder}`, 'mcp-session-id': sessionId, accept: 'text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION },
      });
      expect(response.status, method).toBe(403);
      expect(((await response.json()) as { error: { data: { code: string } } }).error.data.code).toBe('session_mismatch');
    }
    expect(stack.platform.requests.filter((received) => received.method === 'DELETE')).toEqual([]);
    await client.callTool({ name: 'list_agents', arguments: {} });
    expect(stack.platform.toolCalls).toHaveLength(1);
  });

  it('a session ended by its owner (DELETE) is gone: its id is answered 404 for everyone', async () => {
    const { client, sessionId } = await ownerSession();
    const ended = await fetch(stack.mcpUrl, { method: 'DELETE', headers: { authorization: `Bearer ${owner}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION } });
    expect(ended.status).toBe(200);
    await ended.body?.cancel();
    stack.platform.reset();
    for (const key of [owner, intruder]) {
      const response = await postRpc(stack.mcpUrl, toolCall('list_agents'), { key, sessionId });
      expect(response.status).toBe(404);
      expect(response.messages[0].error.data.code).toBe('not_found');
    }
    expect(stack.platform.requests).toEqual([]);
    await client.close();
  });

  it('an id the gateway never bound is 404 (the client then initializes again), and never reaches the server', async () => {
    const response = await postRpc(stack.mcpUrl, toolCall('list_agents'), { key: owner, sessionId: '0f8c2a6e-0000-4000-8000-000000000000' });
    expect(response.status).toBe(404);
    expect(response.messages[0]).toMatchObject({ id: 1, error: { code: -32001, data: { code: 'not_found' } } });
    expect(stack.platform.requests).toEqual([]);
  });

  it('two Mcp-Session-Id headers are refused: the gateway checks the session the server will see', async () => {
    const sessionId = await openSession(stack.mcpUrl, owner);
    const foreign = await openSession(stack.mcpUrl, intruder);
    stack.platform.reset();
    const body = JSON.stringify(toolCall('place_outbound_call', { to: '+15550100' }));
    const response = await rawRequest(
      Number(new URL(stack.gateway.url).port),
      `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${intruder}\r\nContent-Type: application/json\r\nAccept: ${MCP_ACCEPT}\r\n` +
        `Mcp-Session-Id: ${foreign}\r\nMcp-Session-Id: ${sessionId}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(response.status).toBe(400);
    // Refused after the body was read: the answer is the refused message's, with its id.
    expect(JSON.parse(response.body)).toMatchObject({ id: 1, error: { data: { code: 'duplicate_header' } } });
    expect(stack.platform.requests).toEqual([]);
  });

  it('two Content-Type headers are refused', async () => {
    const sessionId = await openSession(stack.mcpUrl, owner);
    stack.platform.reset();
    const body = JSON.stringify(toolCall('list_agents'));
    const response = await rawRequest(
      Number(new URL(stack.gateway.url).port),
      `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${owner}\r\nContent-Type: application/json\r\nContent-Type: text/plain\r\nAccept: ${MCP_ACCEPT}\r\n` +
        `Mcp-Session-Id: ${sessionId}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(response.status).toBe(415);
    expect(stack.platform.requests).toEqual([]);
  });

  it('the owner\'s server stream (GET) opens through the gateway, and only for the owner', async () => {
    const sessionId = await openSession(stack.mcpUrl, owner);
    const open = (key: string, signal?: AbortSignal) =>
      fetch(stack.mcpUrl, {
        headers: { authorization: `Bearer ${key}`, 'mcp-session-id': sessionId!, accept: 'text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION },
        ...(signal ? { signal } : {}),
      });
    const controller = new AbortController();
    const stream = await open(owner, controller.signal);
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    controller.abort();
    const refused = await open(intruder);
    expect(refused.status).toBe(403);
    await refused.body?.cancel();
  });
});
