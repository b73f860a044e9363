import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.ts';
import { MCP_ACCEPT, PROTOCOL_VERSION, openSession, postRpc, readRpc, startMcpStack, toolCall, type McpStack } from '../support/mcp.ts';

// Raw JSON-RPC through the gateway, in every shape an attacker might try, to the SDK
// McpServer of the example platform. What ran is read from the platform's own record.

describe.each([
  { sseMode: 'json', stateful: false },
  { sseMode: 'sse', stateful: true },
] as const)('MCP messages inspected before forwarding: $sseMode responses, stateful $stateful', ({ sseMode, stateful }) => {
  let stack: McpStack;
  let agents: string;
  let agentsId: number;
  let everything: string;
  let sessionOfAgents: string | undefined;
  let sessionOfEverything: string | undefined;
  const asAgents = (body: unknown, headers?: Record<string, string>) =>
    postRpc(stack.mcpUrl, body, { key: agents, ...(sessionOfAgents === undefined ? {} : { sessionId: sessionOfAgents }), ...(headers ? { headers } : {}) });
  const executed = () => stack.platform.toolCalls.map((call) => call.tool);

  beforeAll(async () => {
    stack = await startMcpStack({ sseMode, stateful }, { BODY_LIMIT: '65536' });
    ({ key: agents, id: agentsId } = await stack.key(['mcp:agents']));
    everything = (await stack.key(['mcp:tools', 'mcp:agents'])).key;
    sessionOfAgents = await openSession(stack.mcpUrl, agents);
    sessionOfEverything = await openSession(stack.mcpUrl, everything);
    expect(sessionOfAgents !== undefined).toBe(stateful);
  });
  afterEach(() => stack.platform.reset());
  afterAll(async () => {
    await stack?.close();
  });

  it('an allowed call runs, and the upstream receives the message re-serialised with the identity headers', async () => {
    const response = await asAgents('{ "jsonrpc" : "2.0", "id" : 5, "method" : "tools\\/call", "params" : { "name" : "list\\u005fagents", "arguments" : {} } }');
    expect(response.status).toBe(200);
    expect(response.messages).toMatchObject([{ jsonrpc: '2.0', id: 5, result: { content: [{ type: 'text' }] } }]);
    expect(executed()).toEqual(['list_agents']);
    const received = stack.platform.requests.at(-1)!;
    expect(received.body).toBe('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_agents","arguments":{}}}');
    expect(received.headers).toMatchObject({ 'content-type': 'application/json', 'x-auth-key-id': String(agentsId), 'accept-encoding': 'identity' });
    expect(received.headers.authorization).toBeUndefined();
  });

  it('a batch mixing an allowed and a refused call is refused whole: nothing runs', async () => {
    const response = await asAgents([toolCall('list_agents', {}, 1), toolCall('place_outbound_call', { to: '+15550100' }, 2)]);
    expect(response.status).toBe(403);
    expect(response.headers.get('www-authenticate')).toContain('scope="mcp:calls"');
    expect(response.messages.map((message) => [message.id, message.error.data.code])).toEqual([
      [1, 'insufficient_scope'],
      [2, 'insufficient_scope'],
    ]);
    expect(response.messages[1].error.message).toBe('The API key lacks the scope mcp:calls');
    expect(executed()).toEqual([]);
    expect(stack.platform.requests).toEqual([]);
  });

  it('a refused notification hidden in a batch refuses the batch too', async () => {
    const hidden = { jsonrpc: '2.0', method: 'tools/call', params: { name: 'place_outbound_call', arguments: { to: '+15550100' } } };
    const response = await asAgents([toolCall('list_agents', {}, 1), hidden]);
    expect(response.status).toBe(403);
    expect(executed()).toEqual([]);
  });

  it('a batch of allowed calls runs every one of them', async () => {
    const response = await asAgents([toolCall('list_agents', {}, 1), toolCall('get_agent_status', { agent_id: 2 }, 2)]);
    expect(response.status).toBe(200);
    expect(response.messages.map((message) => message.id).sort()).toEqual([1, 2]);
    expect(executed().sort()).toEqual(['get_agent_status', 'list_agents']);
  });

  const smuggled: Array<[string, string, number, string]> = [
    ['a duplicate tool name', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents","name":"place_outbound_call","arguments":{"to":"+15550100"}}}', 400, 'bad_request'],
    ['the name duplicated through an escape', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents","n\\u0061me":"place_outbound_call","arguments":{"to":"+15550100"}}}', 400, 'bad_request'],
    ['a duplicate method', '{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"place_outbound_call","arguments":{"to":"+15550100"}}}', 400, 'bad_request'],
    ['a duplicate params', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents"},"params":{"name":"place_outbound_call","arguments":{"to":"+15550100"}}}', 400, 'bad_request'],
    ['a duplicate agent_id', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_agent_status","arguments":{"agent_id":1,"agent_id":2}}}', 400, 'bad_request'],
    ['an escaped name of another tool', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"place\\u005foutbound_call","arguments":{"to":"+15550100"}}}', 403, 'insufficient_scope'],
    ['a tool name with a trailing NUL', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"place_outbound_call\\u0000","arguments":{"to":"+15550100"}}}', 200, 'unknown_tool'],
    // Answered as a tool server answers a tool or method it does not have (JSON-RPC -32602, -32601): no scope could allow them.
    ['an upper-case method', '{"jsonrpc":"2.0","id":1,"method":"Tools/Call","params":{"name":"place_outbound_call","arguments":{"to":"+15550100"}}}', 200, 'method_not_found'],
    ['a method outside the table', '{"jsonrpc":"2.0","id":1,"method":"resources/list"}', 200, 'method_not_found'],
    ['a name that is not a string', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":["place_outbound_call"]}}', 400, 'validation_failed'],
    ['a nested batch', '[[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"place_outbound_call","arguments":{"to":"+15550100"}}}]]', 400, 'validation_failed'],
    ['an empty batch', '[]', 400, 'validation_failed'],
    ['a body that is not JSON', 'tools/call place_outbound_call', 400, 'bad_request'],
    ['JSON with a trailing comma', '{"jsonrpc":"2.0","id":1,"method":"ping",}', 400, 'bad_request'],
  ];
  it.each(smuggled)('refuses %s (%i %s) and nothing reaches the server', async (_what, body, status, code) => {
    const response = await asAgents(body);
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(response.messages).toHaveLength(1);
    expect(response.messages[0]).toMatchObject({ jsonrpc: '2.0', error: { data: { code, status } } });
    expect(stack.platform.requests).toEqual([]);
    expect(executed()).toEqual([]);
  });

  const framing: Array<[string, Record<string, string>, number, string]> = [
    ['text/plain', { 'content-type': 'text/plain' }, 415, 'unsupported_media_type'],
    ['application/x-www-form-urlencoded', { 'content-type': 'application/x-www-form-urlencoded' }, 415, 'unsupported_media_type'],
    ['a gzip Content-Encoding', { 'content-encoding': 'gzip' }, 415, 'unsupported_media_type'],
    ['an Mcp-Session-Id holding a list', { 'mcp-session-id': 'a, b' }, 400, 'validation_failed'],
  ];
  it.each(framing)('refuses %s (%i %s)', async (_what, headers, status, code) => {
    const response = await postRpc(stack.mcpUrl, toolCall('list_agents'), { key: agents, headers });
    expect(response.status).toBe(status);
    expect(response.messages[0]).toMatchObject({ error: { data: { code } } });
    expect(stack.platform.requests).toEqual([]);
  });

  // Raw bytes, for the exact chunked framing; the gateway reads and drops the rest of an upload
  // after its 413 (lingering-close.test.ts), so a client still sending gets the answer.
  it('refuses a body over BODY_LIMIT with 413, declared or chunked', async () => {
    stack.platform.reset();
    const { host, pathname } = new URL(stack.mcpUrl);
    const port = Number(new URL(stack.mcpUrl).port);
    const head = (lines: string[]) =>
      [`POST ${pathname} HTTP/1.1`, `Host: ${host}`, `Authorization: Bearer ${agents}`, 'Content-Type: application/json', `Accept: ${MCP_ACCEPT}`,
        ...(sessionOfAgents === undefined ? [] : [`Mcp-Session-Id: ${sessionOfAgents}`]), ...lines].join('\r\n');
    const big = JSON.stringify(toolCall('list_agents', { padding: 'x'.repeat(70_000) }));
    const declared = await rawRequest(port, head([`Content-Length: ${Buffer.byteLength(big)}`, '', big]));
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body)).toMatchObject({ id: null, error: { data: { code: 'payload_too_large' } } });

    const pieces = ['{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"', ...Array.from({ length: 9 }, () => 'x'.repeat(10_000)), '"}}'];
    const chunks = pieces.map((piece) => `${Buffer.byteLength(piece).toString(16)}\r\n${piece}\r\n`).join('');
    const chunked = await rawRequest(port, head(['Transfer-Encoding: chunked', '', chunks + '0\r\n\r\n']));
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body)).toMatchObject({ error: { data: { code: 'payload_too_large' } } });
    expect(stack.platform.requests).toEqual([]);
  });

  it('a disguised MCP path is refused as ambiguous, never forwarded (fastify\'s router would decode it)', async () => {
    const { host } = new URL(stack.mcpUrl);
    const port = Number(new URL(stack.mcpUrl).port);
    const body = JSON.stringify(toolCall('list_agents'));
    for (const target of ['/%6dcp', '/mcp?a#b']) {
      const response = await rawRequest(
        port,
        [`POST ${target} HTTP/1.1`, `Host: ${host}`, `Authorization: Bearer ${agents}`, 'Content-Type: application/json', `Accept: ${MCP_ACCEPT}`,
          ...(sessionOfAgents === undefined ? [] : [`Mcp-Session-Id: ${sessionOfAgents}`]), `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close', '', body].join('\r\n'),
      );
      expect(response.status, target).toBe(400);
      expect(JSON.parse(response.body), target).toMatchObject({ code: 'ambiguous_path' });
    }
    expect(stack.platform.requests).toEqual([]);
  });

  it('a body refused before it is read ends the connection: an endless chunked body is never drained', async () => {
    const { host, pathname, port } = new URL(stack.mcpUrl);
    for (const [method, type, status] of [['DELETE', 'application/json', 400], ['POST', 'text/plain', 415]] as const) {
      const socket = connect(Number(port), '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
      const ended = new Promise((resolve) => socket.once('close', resolve));
      socket.write(
        [`${method} ${pathname} HTTP/1.1`, `Host: ${host}`, `Authorization: Bearer ${agents}`, `Content-Type: ${type}`, `Accept: ${MCP_ACCEPT}`,
          'Transfer-Encoding: chunked', '', `400\r\n${'x'.repeat(1024)}\r\n`].join('\r\n'),
      );
      // More of the body keeps coming; the gateway answers and closes all the same.
      const more = setInterval(() => socket.writable && socket.write(`400\r\n${'x'.repeat(1024)}\r\n`), 20);
      // Closed by the gateway (a gateway that never closes fails the test's own timeout).
      await ended;
      clearInterval(more);
      socket.destroy();
      expect(received, method).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(received.toLowerCase(), method).toContain('connection: close');
    }
    expect(stack.platform.requests).toEqual([]);
  });

  it('a client that leaves mid-body is dropped: nothing forwarded, and the gateway serves on', async () => {
    const { host, pathname, port } = new URL(stack.mcpUrl);
    const body = JSON.stringify(toolCall('list_agents'));
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    // The head and part of the body handed to the network (the write's callback), then the client leaves.
    await new Promise((resolve) =>
      socket.write(
        [`POST ${pathname} HTTP/1.1`, `Host: ${host}`, `Authorization: Bearer ${agents}`, 'Content-Type: application/json', `Accept: ${MCP_ACCEPT}`,
          ...(sessionOfAgents === undefined ? [] : [`Mcp-Session-Id: ${sessionOfAgents}`]), `Content-Length: ${Buffer.byteLength(body) + 100}`, '', body].join('\r\n'),
        resolve,
      ),
    );
    socket.end();

    // A whole call after it is the barrier: the platform records requests in the order they
    // arrive, so had the gateway forwarded the dropped one (id 1), it would come before this (id 2).
    const response = await asAgents(toolCall('list_agents', {}, 2));
    expect(response.status).toBe(200);
    expect(stack.platform.requests.map((request) => JSON.parse(request.body).id)).toEqual([2]);
    expect(executed()).toEqual(['list_agents']);
  });

  it('GET and DELETE need an MCP scope too, and carry no body', async () => {
    const eventsOnly = (await stack.key(['events:write'])).key;
    for (const method of ['GET', 'DELETE']) {
      const refused = await fetch(stack.mcpUrl, { method, headers: { authorization: `Bearer ${eventsOnly}`, accept: 'text/event-stream' } });
      expect(refused.status, method).toBe(403);
      expect(refused.headers.get('www-authenticate')).toMatch(/error="insufficient_scope", scope="mcp:calls mcp:knowledge/);
      await refused.body?.cancel();
    }
    const withBody = await fetch(stack.mcpUrl, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${agents}`, 'content-type': 'application/json', ...(sessionOfAgents === undefined ? {} : { 'mcp-session-id': sessionOfAgents }) },
      body: JSON.stringify(toolCall('place_outbound_call', { to: '+15550100' })),
    });
    expect(withBody.status).toBe(400);
    expect((await readRpc(withBody)).messages[0]).toMatchObject({ error: { data: { code: 'bad_request' } } });
    expect(stack.platform.requests).toEqual([]);
  });

  it('other methods on the MCP path are 405, whatever the credential', async () => {
    for (const token of [agents, stack.admin]) {
      const response = await fetch(stack.mcpUrl, { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{}' });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('DELETE, GET, POST');
      await response.body?.cancel();
    }
    expect(stack.platform.requests).toEqual([]);
  });

  it('tools/list in a raw request is filtered too, alone or in a batch', async () => {
    const alone = await asAgents({ jsonrpc: '2.0', id: 9, method: 'tools/list' });
    expect(alone.status).toBe(200);
    expect(alone.messages[0].result.tools.map((tool: { name: string }) => tool.name).sort()).toEqual(['get_agent_status', 'list_agents']);
    const batch = await asAgents([{ jsonrpc: '2.0', id: 10, method: 'tools/list' }, { jsonrpc: '2.0', id: 11, method: 'ping' }]);
    const listed = batch.messages.find((message) => message.id === 10);
    expect(listed.result.tools.map((tool: { name: string }) => tool.name).sort()).toEqual(['get_agent_status', 'list_agents']);
    // Another key on its own session sees its own tools.
    const other = await postRpc(stack.mcpUrl, { jsonrpc: '2.0', id: 12, method: 'tools/list' }, { key: everything, ...(sessionOfEverything === undefined ? {} : { sessionId: sessionOfEverything }) });
    expect(other.messages[0].result.tools.map((tool: { name: string }) => tool.name).sort()).toEqual([
      'fetch_call_transcript',
      'get_agent_status',
      'list_agents',
      'place_outbound_call',
      'search_knowledge_base',
    ]);
  });

  it('a client-sent x-auth-* header never reaches the tool server', async () => {
    await asAgents(toolCall('list_agents'), { 'x-auth-scopes': 'mcp:calls', 'X_Auth_Key_Id': '1' });
    const [call] = stack.platform.toolCalls;
    expect(call!.headers['x-auth-scopes']).toBe('mcp:agents');
    expect(call!.headers['x-auth-key-id']).toBe(String(agentsId));
    expect(call!.headers['x_auth_key_id']).toBeUndefined();
  });

  it('the upstream is told the protocol version the client sent', async () => {
    await asAgents(toolCall('list_agents'));
    expect(stack.platform.requests.at(-1)!.headers['mcp-protocol-version']).toBe(PROTOCOL_VERSION);
  });
});
