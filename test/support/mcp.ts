/* eslint-disable @typescript-eslint/no-explicit-any -- JSON-RPC answers are read as loosely typed JSON */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startPlatform, type Platform, type PlatformOptions } from '../../examples/platform/platform.ts';
import { startGateway, type GatewayProcess } from './gateway-process.ts';
import { createKey, loginAdmin } from './http.ts';

/** The example platform (the official SDK's McpServer with the nine tools, `sdk` v1 or v2) behind a spawned gateway. */
export interface McpStack {
  platform: Platform;
  gateway: GatewayProcess;
  admin: string;
  /** `gateway.url` + MCP_PATH. */
  mcpUrl: string;
  /** Creates a key through the admin API. */
  key(scopes: string[], agentId?: number): Promise<{ key: string; id: number }>;
  close(): Promise<void>;
}

export const PROTOCOL_VERSION = '2025-06-18';
/** The one revision with JSON-RPC batches: a later one's batch is refused (docs/mcp.md, "Batches"). */
export const BATCH_REVISION = '2025-03-26';
export const MCP_ACCEPT = 'application/json, text/event-stream';

export async function startMcpStack(platformOptions: PlatformOptions, env: Record<string, string> = {}): Promise<McpStack> {
  const platform = await startPlatform({ quiet: true, ...platformOptions });
  let gateway: GatewayProcess;
  try {
    gateway = await startGateway({ UPSTREAM_URL: platform.url, LOG_LEVEL: 'warn', ...env });
  } catch (error) {
    await platform.close();
    throw error;
  }
  const admin = await loginAdmin(gateway.url);
  return {
    platform,
    gateway,
    admin,
    mcpUrl: `${gateway.url}${platformOptions.mcpPath ?? '/mcp'}`,
    key: async (scopes, agentId) => {
      const response = await createKey(gateway.url, admin, { name: 'mcp test', scopes, ...(agentId === undefined ? {} : { agent_id: agentId }) });
      if (response.status !== 201) throw new Error(`create failed: ${response.status} ${response.text}`);
      return { key: response.body.key as string, id: response.body.id as number };
    },
    close: async () => {
      await gateway.stop();
      await platform.close();
    },
  };
}

/** An SDK client over Streamable HTTP, its key sent as `Authorization: Bearer` through `requestInit`; `fetch` replaces the global one. */
export async function connectClient(
  url: string,
  key: string,
  options: { sessionId?: string; fetch?: typeof fetch } = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'gatehouse-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
    ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
  await client.connect(transport);
  return { client, transport };
}

/** An SDK client over the legacy HTTP+SSE transport; `fetch` replaces the global one. */
export async function connectLegacyClient(sseUrl: string, key: string, options: { fetch?: typeof fetch } = {}): Promise<{ client: Client; transport: SSEClientTransport }> {
  const client = new Client({ name: 'gatehouse-e2e-legacy', version: '1.0.0' });
  const transport = new SSEClientTransport(new URL(sseUrl), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
  await client.connect(transport);
  return { client, transport };
}

/**
 * What an SDK client sees of a refusal: the transport throws with the HTTP status
 * (`code`, Streamable HTTP) or in the message (legacy), and the JSON-RPC error body in its text.
 */
export async function refusalOf(promise: Promise<unknown>): Promise<{ status: number; body: any }> {
  let error: unknown;
  try {
    await promise;
  } catch (caught) {
    error = caught;
  }
  if (!(error instanceof Error)) throw new Error('expected the call to be refused');
  const text = error.message;
  const status = (error as { code?: unknown }).code;
  const legacyStatus = /\(HTTP (\d{3})\)/.exec(text)?.[1];
  const start = text.search(/[[{]/);
  return {
    status: typeof status === 'number' && status >= 100 ? status : Number(legacyStatus),
    body: start === -1 ? text : JSON.parse(text.slice(start)),
  };
}

export interface RpcResponse {
  status: number;
  headers: Headers;
  /** The JSON-RPC messages of the answer: the JSON body, or the data of each event of an event stream. */
  messages: any[];
  text: string;
}

/** A raw POST of `body` (a value is serialised; a string is sent as it is). */
export async function postRpc(
  url: string,
  body: unknown,
  options: { key?: string; sessionId?: string; headers?: Record<string, string> } = {},
): Promise<RpcResponse> {
  // A batch is a message of 2025-03-26: sent as that revision unless the test says otherwise.
  const revision = isBatch(body) ? BATCH_REVISION : PROTOCOL_VERSION;
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: MCP_ACCEPT, 'mcp-protocol-version': revision, ...options.headers };
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  if (options.sessionId !== undefined) headers['mcp-session-id'] = options.sessionId;
  const response = await fetch(url, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return readRpc(response);
}

function isBatch(body: unknown): boolean {
  return Array.isArray(body) || (typeof body === 'string' && body.trimStart().startsWith('['));
}

export async function readRpc(response: Response): Promise<RpcResponse> {
  const text = await response.text();
  const type = response.headers.get('content-type') ?? '';
  let messages: any[] = [];
  if (type.startsWith('text/event-stream')) {
    messages = text
      .split(/\r?\n\r?\n/)
      .map((event) => event.split(/\r?\n/).filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trim()).join('\n'))
      .filter((data) => data !== '')
      .map((data) => JSON.parse(data));
  } else if (type.includes('json') && text !== '') {
    const parsed = JSON.parse(text);
    messages = Array.isArray(parsed) ? parsed : [parsed];
  }
  return { status: response.status, headers: response.headers, messages, text };
}

export const initialize = (id: number | string = 0) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
});

export const toolCall = (name: unknown, args: Record<string, unknown> = {}, id: number | string = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});

/** Initializes a session by hand (raw HTTP); the session id when the server is stateful. */
export async function openSession(url: string, key: string): Promise<string | undefined> {
  const init = await postRpc(url, initialize(), { key });
  if (init.status !== 200) throw new Error(`initialize failed: ${init.status} ${init.text}`);
  const sessionId = init.headers.get('mcp-session-id') ?? undefined;
  const initialized = await postRpc(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { key, ...(sessionId === undefined ? {} : { sessionId }) });
  if (initialized.status !== 202) throw new Error(`notifications/initialized failed: ${initialized.status} ${initialized.text}`);
  return sessionId;
}
