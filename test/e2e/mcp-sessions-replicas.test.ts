import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlatform, type Platform } from '../../examples/platform/platform.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin } from '../support/http.ts';
import { connectClient, openSession, postRpc, toolCall } from '../support/mcp.ts';
import { startReplicas, waitForRedis } from '../support/replicas.ts';
import { createTestDatabase, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';

/**
 * Two gateway replicas on one PostgreSQL and one Redis in front of one stateful MCP server:
 * a session opened through one replica is bound in Redis, so it may be continued through
 * the other by its key, and by no other key.
 */
describe.skipIf(postgresUrl() === null || redisUrl() === null)('MCP session bindings shared by replicas through Redis', () => {
  let database: TestDatabase;
  let platform: Platform;
  let replicas: GatewayProcess[];
  let owner: string;
  let intruder: string;
  let client: Client | undefined;

  beforeAll(async () => {
    database = await createTestDatabase();
    platform = await startPlatform({ quiet: true, sseMode: 'sse', stateful: true });
    replicas = await startReplicas(2, { DATABASE_URL: database.url, REDIS_URL: redisUrl()!, UPSTREAM_URL: platform.url, LOG_LEVEL: 'warn' });
    await waitForRedis(replicas, 'ok');
    const admin = await loginAdmin(replicas[0]!.url);
    owner = (await createKey(replicas[0]!.url, admin, { name: 'owner', scopes: ['mcp:agents'] })).body.key;
    intruder = (await createKey(replicas[0]!.url, admin, { name: 'intruder', scopes: ['mcp:agents', 'mcp:tools'] })).body.key;
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await Promise.all((replicas ?? []).map((replica) => replica.stop()));
    await platform?.close();
    await database?.drop();
  });

  it('a session opened on one replica continues on the other for its key, and is refused there to another key', async () => {
    const connected = await connectClient(`${replicas[0]!.url}/mcp`, owner);
    client = connected.client;
    const sessionId = connected.transport.sessionId!;
    expect(sessionId).toEqual(expect.any(String));

    const continued = await postRpc(`${replicas[1]!.url}/mcp`, toolCall('list_agents', {}, 3), { key: owner, sessionId });
    expect(continued.status).toBe(200);
    expect(continued.messages).toMatchObject([{ id: 3, result: { content: expect.any(Array) } }]);

    const hijack = await postRpc(`${replicas[1]!.url}/mcp`, toolCall('list_agents', {}, 4), { key: intruder, sessionId });
    expect(hijack.status).toBe(403);
    expect(hijack.messages[0].error.data.code).toBe('session_mismatch');
    expect(platform.toolCalls.map((call) => call.sessionId)).toEqual([sessionId]);
  });

  it('a tool listed through one replica can be called with Mcp-Param-* through the other: the schema is shared in Redis', async () => {
    const sessionId = await openSession(`${replicas[0]!.url}/mcp`, owner);
    const listed = await postRpc(`${replicas[0]!.url}/mcp`, { jsonrpc: '2.0', id: 5, method: 'tools/list' }, { key: owner, sessionId });
    expect(listed.messages[0].result.tools.find((tool: { name: string }) => tool.name === 'get_agent_status').inputSchema.properties.agent_id['x-mcp-header']).toBe('Agent-Id');
    platform.reset();

    const call = toolCall('get_agent_status', { agent_id: 2 }, 6);
    const mismatched = await postRpc(`${replicas[1]!.url}/mcp`, call, { key: owner, sessionId, headers: { 'mcp-param-agent-id': '3' } });
    expect(mismatched.status).toBe(400);
    expect(mismatched.messages[0]).toMatchObject({ id: 6, error: { code: -32020, data: { code: 'header_mismatch' } } });
    expect(platform.requests).toEqual([]);

    const agreeing = await postRpc(`${replicas[1]!.url}/mcp`, call, { key: owner, sessionId, headers: { 'mcp-param-agent-id': '2' } });
    expect(agreeing.status).toBe(200);
    expect(platform.toolCalls.map((entry) => [entry.tool, entry.headers['mcp-param-agent-id']])).toEqual([['get_agent_status', '2']]);
  });
});
