import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { flattenHeaders, headersWithPrefix } from './headers.ts';
import { jsonRpcError } from './json-rpc.ts';
import { createLegacySseEndpoint } from './legacy-sse.ts';
import { createV2StreamableHttpEndpoint } from './mcp-v2.ts';
import { createStreamableHttpEndpoint } from './streamable-http.ts';
import type { RecordedToolCall } from './tools.ts';

export { PLATFORM_TOOL_NAMES, type PlatformToolName, type RecordedToolCall } from './tools.ts';

export interface PlatformOptions {
  /** Default 0: any free port. */
  port?: number;
  /** Default `127.0.0.1`. */
  host?: string;
  /** Streamable HTTP MCP endpoint. Default `/mcp`. */
  mcpPath?: string;
  /**
   * The MCP SDK generation serving the nine tools on the MCP path. `v1` (default):
   * `@modelcontextprotocol/sdk` 1.x, the 2025 protocol era (`initialize`). `v2`:
   * `@modelcontextprotocol/server` 2.x, the 2025 era and the 2026-07-28 era (`server/discover`,
   * no sessions) on the same path (mcp-v2.ts); it has no legacy HTTP+SSE transport.
   */
  sdk?: 'v1' | 'v2';
  /** `json` (default): `enableJsonResponse`, answers are application/json; `sse`: answers are text/event-stream. */
  sseMode?: 'json' | 'sse';
  /**
   * Default true: `Mcp-Session-Id` sessions. False: stateless, no session id, GET/DELETE on the MCP path answer 405.
   * (With `sdk: 'v2'` this is about 2025-era clients: the 2026-07-28 era has no sessions.)
   */
  stateful?: boolean;
  /** Legacy HTTP+SSE transport, served only when both paths are given (and only with `sdk: 'v1'`). */
  legacySsePath?: string;
  legacyMessagesPath?: string;
  /** Default false: one line per event and tool call on stdout. */
  quiet?: boolean;
  /** Keep at most this many of each record, dropping the oldest (long demo or benchmark runs). Default: keep all. */
  recordLimit?: number;
}

/** An event posted to `/api/v1/agents/{agentId}/events`. */
export interface RecordedEvent {
  /** The path segment exactly as received (the gateway is meant to let only positive integers through). */
  agentId: string;
  method: string;
  /** Parsed JSON when the body is JSON, else the raw text. */
  body: unknown;
  /** All request headers, lower-case names; the gateway's identity headers are the `x-auth-*` ones. */
  headers: Record<string, string | undefined>;
  at: Date;
}

/** Every request the platform received, whatever its path. */
export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  /** As on the wire, to see duplicated headers. */
  rawHeaders: string[];
  body: string;
  at: Date;
}

export interface Platform {
  /** `http://host:port`, no trailing slash. */
  url: string;
  port: number;
  /** `url` + the MCP path. */
  mcpUrl: string;
  events: RecordedEvent[];
  /** The server's own record of tool executions: a refused call never appears here. */
  toolCalls: RecordedToolCall[];
  requests: RecordedRequest[];
  /** Empty the three records (same arrays). */
  reset(): void;
  close(): Promise<void>;
}

const DEFAULT_HOST = '127.0.0.1';
const DEFAULT_MCP_PATH = '/mcp';
const EVENTS_PATH = /^\/api\/v1\/agents\/([^/]+)\/events$/;
const SLOW_DELAY_MS = 3000;
const SSE_EVENT_COUNT = 3;
const SSE_INTERVAL_MS = 100;

/**
 * The example agent platform: the upstream behind the gateway in the demo, the end-to-end
 * tests and the benchmark. Events sink, MCP server (nine tools, either SDK generation),
 * legacy SSE transport and a catch-all "dashboard", on one node:http server that records
 * what it receives.
 */
export async function startPlatform(options: PlatformOptions = {}): Promise<Platform> {
  const mcpPath = options.mcpPath ?? DEFAULT_MCP_PATH;
  const log = options.quiet === true ? () => {} : (line: string) => console.log(line);
  const events: RecordedEvent[] = [];
  const toolCalls: RecordedToolCall[] = [];
  const requests: RecordedRequest[] = [];
  const keep = <T>(list: T[], item: T): void => {
    list.push(item);
    if (options.recordLimit !== undefined && list.length > options.recordLimit) list.shift();
  };
  const recordToolCall = (call: RecordedToolCall): void => {
    keep(toolCalls, call);
    log(`tool ${call.tool} ${JSON.stringify(call.arguments)} key=${call.headers['x-auth-key-id'] ?? '-'}`);
  };

  const sdk = options.sdk ?? 'v1';
  if (sdk === 'v2' && (options.legacySsePath !== undefined || options.legacyMessagesPath !== undefined)) {
    throw new Error('example platform: the v2 SDK serves no legacy HTTP+SSE transport (legacySsePath/legacyMessagesPath need sdk: v1)');
  }
  const endpointOptions = { sseMode: options.sseMode ?? 'json', stateful: options.stateful ?? true, record: recordToolCall } as const;
  const mcp = sdk === 'v2' ? createV2StreamableHttpEndpoint(endpointOptions) : createStreamableHttpEndpoint(endpointOptions);
  const legacy =
    options.legacySsePath !== undefined && options.legacyMessagesPath !== undefined
      ? { ssePath: options.legacySsePath, messagesPath: options.legacyMessagesPath, endpoint: createLegacySseEndpoint(options.legacyMessagesPath, recordToolCall) }
      : undefined;
  const timers = new Set<NodeJS.Timeout>();

  async function route(request: IncomingMessage, response: ServerResponse, body: string): Promise<void> {
    const method = request.method ?? 'GET';
    const path = (request.url ?? '/').split('?', 1)[0] ?? '/';
    if (path === mcpPath) {
      const message = parseJsonRpc(method, body);
      if (message === undefined) return sendJson(response, 400, PARSE_ERROR);
      return mcp.handle(request, response, message.value, body);
    }
    if (legacy !== undefined && path === legacy.ssePath && method === 'GET') return legacy.endpoint.openStream(response);
    if (legacy !== undefined && path === legacy.messagesPath && method === 'POST') {
      const message = parseJsonRpc(method, body);
      if (message === undefined) return sendJson(response, 400, PARSE_ERROR);
      return legacy.endpoint.postMessage(request, response, message.value);
    }
    const eventsMatch = EVENTS_PATH.exec(path);
    if (eventsMatch !== null) return answerEvents(request, response, eventsMatch[1] ?? '', body);
    if (path.startsWith('/sse/')) return streamEvents(response);
    if (path.startsWith('/slow/')) return answerSlowly(response, path);
    return answerDashboard(request, response, path);
  }

  function answerEvents(request: IncomingMessage, response: ServerResponse, agentId: string, body: string): void {
    const method = request.method ?? 'GET';
    if (method === 'GET') {
      const received = events.filter((event) => event.agentId === agentId);
      return sendJson(response, 200, { agent_id: agentId, events: received.map(({ body: eventBody, at }) => ({ body: eventBody, at })) });
    }
    if (method !== 'POST' && method !== 'PUT') {
      response.setHeader('allow', 'GET, POST, PUT');
      return sendJson(response, 405, { error: 'method_not_allowed' });
    }
    const headers = flattenHeaders(request.headers);
    keep(events, { agentId, method, body: parseLenient(body), headers, at: new Date() });
    log(`event agent=${agentId} key=${headers['x-auth-key-id'] ?? '-'} ${body.length} bytes`);
    sendJson(response, 202, { accepted: true });
  }

  function streamEvents(response: ServerResponse): void {
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let sent = 0;
    const timer = setInterval(() => {
      response.write(`data: event ${sent}\n\n`);
      if (++sent === SSE_EVENT_COUNT) {
        clearInterval(timer);
        timers.delete(timer);
        response.end();
      }
    }, SSE_INTERVAL_MS);
    timers.add(timer);
    response.on('close', () => {
      clearInterval(timer);
      timers.delete(timer);
    });
  }

  function answerSlowly(response: ServerResponse, path: string): void {
    const timer = setTimeout(() => {
      timers.delete(timer);
      sendJson(response, 200, { slow: true, path });
    }, SLOW_DELAY_MS);
    timers.add(timer);
  }

  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      keep(requests, { method: request.method ?? '', url: request.url ?? '', headers: request.headers, rawHeaders: request.rawHeaders, body, at: new Date() });
      route(request, response, body).catch((error: unknown) => {
        console.error('example platform: request failed', error);
        if (!response.headersSent) sendJson(response, 500, { error: 'internal_error' });
        else response.destroy();
      });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? DEFAULT_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port, address } = server.address() as AddressInfo;
  const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;

  return {
    url,
    port,
    mcpUrl: url + mcpPath,
    events,
    toolCalls,
    requests,
    reset() {
      events.length = 0;
      toolCalls.length = 0;
      requests.length = 0;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      await Promise.all([mcp.close(), legacy?.endpoint.close()]);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

const PARSE_ERROR = jsonRpcError(-32700, 'Parse error');

/**
 * The body, already read, for the SDK transports; undefined when a POST carries no JSON.
 * (Given no parsed body, they would try to read the consumed request stream again.)
 */
function parseJsonRpc(method: string, body: string): { value: unknown } | undefined {
  if (body === '') return method === 'POST' ? undefined : { value: undefined };
  try {
    return { value: JSON.parse(body) };
  } catch {
    return undefined;
  }
}

function parseLenient(body: string): unknown {
  try {
    return body === '' ? undefined : JSON.parse(body);
  } catch {
    return body;
  }
}

function answerDashboard(request: IncomingMessage, response: ServerResponse, path: string): void {
  const headers = flattenHeaders(request.headers);
  const identity = headersWithPrefix(headers, 'x-auth-');
  const forwarded = headersWithPrefix(headers, 'x-forwarded-');
  if (path === '/dashboard' && (headers['accept'] ?? '').includes('text/html')) {
    const rows = Object.entries(identity).map(([name, value]) => `<tr><th>${escapeHtml(name)}</th><td>${escapeHtml(value ?? '')}</td></tr>`);
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(`<!doctype html><title>Agent platform</title><h1>Agent platform dashboard</h1><table>${rows.join('')}</table>\n`);
    return;
  }
  sendJson(response, 200, { ok: true, dashboard: path === '/dashboard', method: request.method, path: request.url, identity, forwarded });
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
