import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { registerPlatformTools, type ToolCallSink } from './tools.ts';

export interface StreamableHttpOptions {
  /** `json`: `enableJsonResponse` (one application/json answer); `sse`: a text/event-stream per POST. */
  sseMode: 'json' | 'sse';
  /** Stateful: session ids, a server per session, GET stream and DELETE. Stateless: a fresh server per request. */
  stateful: boolean;
  record: ToolCallSink;
}

/** The MCP Streamable HTTP endpoint: `handle` takes a request whose body was already read and parsed. */
export interface StreamableHttpEndpoint {
  handle(request: IncomingMessage, response: ServerResponse, body: unknown): Promise<void>;
  close(): Promise<void>;
}

export function createMcpServer(record: ToolCallSink): McpServer {
  const server = new McpServer({ name: 'example-agent-platform', version: '1.0.0' });
  registerPlatformTools(server, record);
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
      if (request.method !== 'POST') {
        // No session, so no standalone GET stream and nothing to DELETE.
        response.writeHead(405, { allow: 'POST', 'content-type': 'application/json' });
        response.end(JSON.stringify(jsonRpcError(-32000, 'Method not allowed.')));
        return;
      }
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
        if (session === undefined) {
          response.writeHead(404, { 'content-type': 'application/json' });
          response.end(JSON.stringify(jsonRpcError(-32001, 'Session not found')));
          return;
        }
        await session.transport.handleRequest(request, response, body);
        return;
      }
      if (request.method !== 'POST' || !isInitializeRequest(body)) {
        response.writeHead(400, { 'content-type': 'application/json' });
        response.end(JSON.stringify(jsonRpcError(-32000, 'Bad Request: No valid session ID provided')));
        return;
      }
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

export function jsonRpcError(code: number, message: string, id: string | number | null = null): object {
  return { jsonrpc: '2.0', error: { code, message }, id };
}
