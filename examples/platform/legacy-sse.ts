import type { IncomingMessage, ServerResponse } from 'node:http';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { SESSION_NOT_FOUND, sendCanned } from './json-rpc.ts';
import { createMcpServer } from './streamable-http.ts';
import type { ToolCallSink } from './tools.ts';

/**
 * The deprecated HTTP+SSE transport (protocol 2024-11-05): `GET streamPath` opens the stream,
 * whose first `endpoint` event names `messagesPath?sessionId=…`; messages posted there are
 * answered `202` and their responses arrive on the stream.
 */
export interface LegacySseEndpoint {
  openStream(response: ServerResponse): Promise<void>;
  postMessage(request: IncomingMessage, response: ServerResponse, body: unknown): Promise<void>;
  close(): Promise<void>;
}

export function createLegacySseEndpoint(messagesPath: string, record: ToolCallSink): LegacySseEndpoint {
  // SSEServerTransport is deprecated in the SDK but is the reference for this transport.
  const sessions = new Map<string, { server: McpServer; transport: SSEServerTransport }>();
  return {
    async openStream(response) {
      const transport = new SSEServerTransport(messagesPath, response);
      const server = createMcpServer(record);
      sessions.set(transport.sessionId, { server, transport });
      transport.onclose = () => {
        sessions.delete(transport.sessionId);
      };
      await server.connect(transport);
    },
    async postMessage(request, response, body) {
      const url = new URL(request.url ?? '/', 'http://platform.invalid');
      const session = sessions.get(url.searchParams.get('sessionId') ?? '');
      if (session === undefined) return sendCanned(response, SESSION_NOT_FOUND);
      await session.transport.handlePostMessage(request, response, body);
    },
    async close() {
      const open = [...sessions.values()];
      sessions.clear();
      await Promise.all(open.map(({ server }) => server.close()));
    },
  };
}
