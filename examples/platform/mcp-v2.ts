import { randomUUID } from 'node:crypto';
import { createMcpHandler, isInitializeRequest, isLegacyRequest, McpServer, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { NO_SESSION, SESSION_NOT_FOUND, STATELESS_POST_ONLY } from './json-rpc.ts';
import type { StreamableHttpEndpoint, StreamableHttpOptions } from './streamable-http.ts';
import { PLATFORM_TOOL_NAMES, platformTool, runPlatformTool, type ToolCallSink } from './tools.ts';
import { headersRecord, sendWebResponse, toWebRequest, webResponseOf } from './web-bridge.ts';

/**
 * The same nine tools served with `@modelcontextprotocol/server` 2.x, both protocol eras on
 * the one MCP path (the v2 SDK's docs/serving/legacy-clients.md, "Keep a sessionful 2025
 * deployment running"):
 *
 * - the 2026-07-28 era (`server/discover`, a `_meta` envelope on every request, no
 *   sessions) goes to `createMcpHandler` with `legacy: 'reject'`, a fresh server per request;
 * - the 2025 era (`initialize`), told apart by the SDK's own `isLegacyRequest`, goes to the
 *   v2 `WebStandardStreamableHTTPServerTransport`, with `Mcp-Session-Id` sessions when
 *   `stateful`, else a fresh server per request. (`createMcpHandler`'s own stateless
 *   fallback always answers with an event stream; this way `sseMode` holds for both eras.)
 *
 * The v2 server has no HTTP+SSE transport: legacySsePath/legacyMessagesPath are v1 only.
 */
export function createV2StreamableHttpEndpoint(options: StreamableHttpOptions): StreamableHttpEndpoint {
  // `auto` answers one JSON body unless a handler sends a notification before its result, which
  // these tools never do: the same answers as `json`, which would also warn on stderr at every start.
  const responseMode = options.sseMode === 'sse' ? 'sse' : 'auto';
  const modern = createMcpHandler(() => createV2McpServer(options.record), { legacy: 'reject', responseMode });
  const legacy = options.stateful ? statefulLegacyLeg(options) : statelessLegacyLeg(options);
  return {
    async handle(request, response, body, raw) {
      const web = toWebRequest(request, response, raw);
      const whenClosed = (listener: () => void) => response.once('close', listener);
      const answer = (await isLegacyRequest(web, body)) ? await legacy.serve(web, body, whenClosed) : await modern.fetch(web, { parsedBody: body });
      await sendWebResponse(answer, response);
    },
    async close() {
      await Promise.all([modern.close(), legacy.close()]);
    },
  };
}

/** The `@modelcontextprotocol/server` 2.x server with the nine tools (streamable-http.ts has the 1.x one). */
export function createV2McpServer(record: ToolCallSink): McpServer {
  const server = new McpServer({ name: 'example-agent-platform', version: '1.0.0' });
  for (const name of PLATFORM_TOOL_NAMES) {
    const { description, inputSchema } = platformTool(name);
    server.registerTool(name, { description, inputSchema: z.object(inputSchema) }, (args: Record<string, unknown>, ctx) =>
      runPlatformTool(name, args, { headers: headersRecord(ctx.http?.req?.headers), sessionId: ctx.sessionId }, record),
    );
  }
  return server;
}

/** The 2025-era half of the endpoint: a web request (body already parsed) in, a web response out. */
interface LegacyLeg {
  /** `whenClosed`: calls its listener once the HTTP exchange is over (answered, or the client gone). */
  serve(request: Request, body: unknown, whenClosed: (listener: () => void) => void): Promise<Response>;
  close(): Promise<void>;
}

/** Stateless without `onSession`; with it, sessions whose id is handed to `onSession`. */
function newTransport(options: StreamableHttpOptions, onSession?: (id: string) => void): WebStandardStreamableHTTPServerTransport {
  return new WebStandardStreamableHTTPServerTransport({
    enableJsonResponse: options.sseMode === 'json',
    ...(onSession === undefined ? { sessionIdGenerator: undefined } : { sessionIdGenerator: () => randomUUID(), onsessioninitialized: onSession }),
  });
}

function statelessLegacyLeg(options: StreamableHttpOptions): LegacyLeg {
  const open = new Set<McpServer>();
  return {
    async serve(request, body, whenClosed) {
      if (request.method !== 'POST') return webResponseOf(STATELESS_POST_ONLY);
      const server = createV2McpServer(options.record);
      const transport = newTransport(options);
      open.add(server);
      whenClosed(() => {
        open.delete(server);
        void server.close();
      });
      await server.connect(transport);
      return transport.handleRequest(request, { parsedBody: body });
    },
    async close() {
      await Promise.all([...open].map((server) => server.close()));
    },
  };
}

function statefulLegacyLeg(options: StreamableHttpOptions): LegacyLeg {
  const sessions = new Map<string, { server: McpServer; transport: WebStandardStreamableHTTPServerTransport }>();
  return {
    async serve(request, body) {
      const sessionId = request.headers.get('mcp-session-id');
      if (sessionId !== null) {
        const session = sessions.get(sessionId);
        if (session === undefined) return webResponseOf(SESSION_NOT_FOUND);
        return session.transport.handleRequest(request, { parsedBody: body });
      }
      if (request.method !== 'POST' || !isInitializeRequest(body)) return webResponseOf(NO_SESSION);
      const server = createV2McpServer(options.record);
      const transport: WebStandardStreamableHTTPServerTransport = newTransport(options, (id) => {
        sessions.set(id, { server, transport });
      });
      transport.onclose = () => {
        if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
      };
      await server.connect(transport);
      return transport.handleRequest(request, { parsedBody: body });
    },
    async close() {
      const open = [...sessions.values()];
      sessions.clear();
      await Promise.all(open.map(({ server }) => server.close()));
    },
  };
}
