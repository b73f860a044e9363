import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { flattenHeaders } from './headers.ts';
import { NO_SESSION, SESSION_NOT_FOUND, STATELESS_POST_ONLY, sendCanned } from './json-rpc.ts';
import { PLATFORM_TOOL_NAMES, platformTool, runPlatformTool, type ToolCallSink } from './tools.ts';

export interface StreamableHttpOptions {
  /** `json`: `enableJsonResponse` (one application/json answer); `sse`: a text/event-stream per POST. */
  sseMode: 'json' | 'sse';
  /** Stateful: session ids, a server per session, GET stream and DELETE. Stateless: a fresh server per request. */
  stateful: boolean;
  record: ToolCallSink;
}

/**
 * The MCP Streamable HTTP endpoint: `handle` takes a request whose body was already read,
 * parsed (`body`, undefined when there is none) and as received (`raw`).
 */
export interface StreamableHttpEndpoint {
  handle(request: IncomingMessage, response: ServerResponse, body: unknown, raw: string): Promise<void>;
  close(): Promise<void>;
}

/** The `@modelcontextprotocol/sdk` 1.x server with the nine tools (mcp-v2.ts has the 2.x one). */
export function createMcpServer(record: ToolCallSink): McpServer {
  const server = new McpServer({ name: 'example-agent-platform', version: '1.0.0' });
  for (const name of PLATFORM_TOOL_NAMES) {
    server.registerTool(name, platformTool(name), (args: Record<string, unknown>, extra) =>
      runPlatformTool(name, args, { headers: flattenHeaders(extra.requestInfo?.headers ?? {}), sessionId: extra.sessionId }, record),
    );
  }
  return server;
}

export function createStreamableHttpEndpoint(options: StreamableHttpOptions): StreamableHttpEndpoint {
  return options.stateful ? statefulEndpoint(options) : statelessEndpoint(options);
}

// The SDK refuses to reuse a stateless transport, and a server serves one transport:
// https://github.com/modelcontextprotocol/typescript-sdk (examples/server/simpleStatelessStreamableHttp.ts)
function statelessEndpoint(options: StreamableHttpOptions): StreamableHttpEndpoint {
  const open = new Set<McpServer>();
  return {
    async handle(request, response, body) {
      if (request.method !== 'POST') return sendCanned(response, STATELESS_POST_ONLY);
      const server = createMcpServer(options.record);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: options.sseMode === 'json' });
      open.add(server);
      response.on('close', () => {
        open.delete(server);
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(request, response, body);
    },
    async close() {
      await Promise.all([...open].map((server) => server.close()));
    },
  };
}

function statefulEndpoint(options: StreamableHttpOptions): StreamableHttpEndpoint {
  const sessions = new Map<string, { server: McpServer; transport: StreamableHTTPServerTransport }>();
  return {
    async handle(request, response, body) {
      const sessionId = request.headers['mcp-session-id'];
      if (typeof sessionId === 'string') {
        const session = sessions.get(sessionId);
        if (session === undefined) return sendCanned(response, SESSION_NOT_FOUND);
        await session.transport.handleRequest(request, response, body);
        return;
      }
      if (request.method !== 'POST' || !isInitializeRequest(body)) return sendCanned(response, NO_SESSION);
      const server = createMcpServer(options.record);
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: options.sseMode === 'json',
        onsessioninitialized: (id) => {
          sessions.set(id, { server, transport });
        },
      });
      transport.onclose = () => {
        if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
      };
      await server.connect(transport);
      await transport.handleRequest(request, response, body);
    },
    async close() {
      const open = [...sessions.values()];
      sessions.clear();
      await Promise.all(open.map(({ server }) => server.close()));
    },
  };
}
