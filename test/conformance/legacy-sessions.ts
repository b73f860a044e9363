import { randomUUID } from 'node:crypto';
import type { EventStore, McpServer } from '@modelcontextprotocol/server';
import { isInitializeRequest, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';

/**
 * The 2025-era Streamable HTTP endpoint with sessions. The SDK's `createMcpHandler` serves
 * 2025 clients statelessly (no GET stream, no DELETE, no resumption), but the 2025 scenarios
 * test exactly those: server-session-lifecycle (DELETE, then 404), server-sse-polling and
 * server-sse-multiple-streams (GET streams, Last-Event-ID replay). So 2025 traffic gets one
 * transport per session here, as the SDK's docs/serving/legacy-clients.md recommends.
 */
export interface LegacySessions {
  handle(request: Request): Promise<Response>;
  close(): Promise<void>;
}

/** How long a client waits before reconnecting to a stream the server closed (SSE `retry`). */
const RETRY_MS = 500;

export function createLegacySessions(createServer: () => McpServer): LegacySessions {
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();

  async function open(request: Request, body: unknown): Promise<Response> {
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: memoryEventStore(),
      retryInterval: RETRY_MS,
      onsessioninitialized: (id) => void sessions.set(id, transport),
      onsessionclosed: (id) => void sessions.delete(id),
    });
    const server = createServer();
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
      void server.close();
    };
    await server.connect(transport);
    return transport.handleRequest(request, { parsedBody: body });
  }

  return {
    async handle(request) {
      const sessionId = request.headers.get('mcp-session-id');
      if (sessionId !== null) {
        const transport = sessions.get(sessionId);
        // An ended or unknown session is 404: the client starts a new one (spec, session management).
        return transport ? transport.handleRequest(request) : rpcError(404, -32001, 'Session not found');
      }
      const body: unknown = request.method === 'POST' ? await request.json().catch(() => undefined) : undefined;
      if (isInitializeRequest(body)) return open(request, body);
      return rpcError(400, -32000, 'Bad Request: Mcp-Session-Id header required');
    },
    async close() {
      await Promise.all([...sessions.values()].map((transport) => transport.close()));
    },
  };
}

function rpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: '2.0', id: null, error: { code, message } }, { status });
}

/**
 * Events of every stream of one session, in order, so a client reconnecting with
 * Last-Event-ID gets what it missed on that stream (SEP-1699). Kept for the session's life:
 * the scenarios' sessions are short.
 */
function memoryEventStore(): EventStore {
  const events: { id: string; streamId: string; message: unknown }[] = [];
  return {
    async storeEvent(streamId, message) {
      const id = `${streamId}:${events.length}`;
      events.push({ id, streamId, message });
      return id;
    },
    async getStreamIdForEventId(eventId) {
      return events.find((event) => event.id === eventId)?.streamId;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const from = events.findIndex((event) => event.id === lastEventId);
      const streamId = events[from]?.streamId;
      if (streamId === undefined) throw new Error(`Unknown event id ${lastEventId}`);
      for (const event of events.slice(from + 1)) {
        if (event.streamId === streamId) await send(event.id, event.message as never);
      }
      return streamId;
    },
  };
}
