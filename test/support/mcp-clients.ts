import { Client as V2Client, SSEClientTransport as V2SSEClientTransport, StreamableHTTPClientTransport as V2StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { connectClient, connectLegacyClient } from './mcp.ts';

// Both MCP SDK generations as clients, behind one small interface: the 1.x `@modelcontextprotocol/sdk`
// client and the 2.x `@modelcontextprotocol/client` in each of its version negotiation modes.

/** How a test client connects: which SDK, which transport, which negotiation. */
export interface ClientMode {
  label: string;
  sdk: 'v1' | 'v2';
  /** `streamable`: Streamable HTTP on the MCP path; `sse`: the legacy HTTP+SSE transport. */
  transport: 'streamable' | 'sse';
  /** 2.x only: `ClientOptions.versionNegotiation.mode`; absent is the 2.x default (`legacy`). */
  negotiation?: 'legacy' | 'auto' | { pin: string };
  /** 2.x only: `supportedProtocolVersions`, to offer an older 2025-era revision in `initialize`. */
  protocolVersions?: string[];
  /** The era the client lands on against a server that speaks both. */
  era: 'legacy' | 'modern';
}

export const CLIENT_MODES: readonly ClientMode[] = [
  { label: 'sdk 1.x over Streamable HTTP', sdk: 'v1', transport: 'streamable', era: 'legacy' },
  { label: 'sdk 1.x over legacy HTTP+SSE', sdk: 'v1', transport: 'sse', era: 'legacy' },
  { label: 'client 2.x over legacy HTTP+SSE', sdk: 'v2', transport: 'sse', era: 'legacy' },
  { label: 'client 2.x, versionNegotiation absent', sdk: 'v2', transport: 'streamable', era: 'legacy' },
  { label: 'client 2.x, mode legacy', sdk: 'v2', transport: 'streamable', negotiation: 'legacy', era: 'legacy' },
  // A pin must name a 2026-07-28+ revision (the client throws a TypeError otherwise); older revisions are offered this way.
  { label: 'client 2.x, mode legacy offering 2025-03-26', sdk: 'v2', transport: 'streamable', negotiation: 'legacy', protocolVersions: ['2025-03-26'], era: 'legacy' },
  { label: 'client 2.x, mode legacy offering 2024-11-05', sdk: 'v2', transport: 'streamable', negotiation: 'legacy', protocolVersions: ['2024-11-05'], era: 'legacy' },
  { label: 'client 2.x, mode auto', sdk: 'v2', transport: 'streamable', negotiation: 'auto', era: 'modern' },
  { label: 'client 2.x, mode pin 2026-07-28', sdk: 'v2', transport: 'streamable', negotiation: { pin: '2026-07-28' }, era: 'modern' },
];

/** One HTTP exchange of a client's transport, as the client received it. */
export interface WireExchange {
  method: string;
  url: string;
  requestHeaders: Headers;
  /** The posted body, parsed; undefined for a GET. */
  message: unknown;
  status: number;
  headers: Headers;
  /** The answer's body; only read for answers that are not event streams. */
  body: Promise<string | undefined>;
}

/** What the tests need of a connected client, whichever its SDK. */
export interface GenerationClient {
  mode: ClientMode;
  /** The era the connection landed on (1.x clients know only `legacy`). */
  era: 'legacy' | 'modern';
  listTools(): Promise<Array<{ name: string; inputSchema: Record<string, unknown> }>>;
  callTool(name: string, args: Record<string, unknown>): Promise<{ content?: unknown; isError?: boolean }>;
  /** Every exchange the transport had, in order. */
  wire: WireExchange[];
  close(): Promise<void>;
}

/** Where the gateway serves MCP: Streamable HTTP and, when configured, the legacy stream. */
export interface McpUrls {
  mcpUrl: string;
  sseUrl?: string;
}

/** Connects a client of `mode` with the API key as `Authorization: Bearer`; rejects as the SDK's connect does. */
export async function connectAs(mode: ClientMode, urls: McpUrls, key: string): Promise<GenerationClient> {
  const wire: WireExchange[] = [];
  const fetch = recordingFetch(wire);
  const url = mode.transport === 'sse' ? urls.sseUrl : urls.mcpUrl;
  if (url === undefined) throw new Error(`${mode.label}: no URL for ${mode.transport}`);
  if (mode.sdk === 'v1') {
    const { client } = mode.transport === 'sse' ? await connectLegacyClient(url, key, { fetch }) : await connectClient(url, key, { fetch });
    return {
      mode,
      era: 'legacy',
      wire,
      listTools: async () => (await client.listTools()).tools,
      callTool: async (name, args) => client.callTool({ name, arguments: args }) as Promise<{ content?: unknown; isError?: boolean }>,
      close: () => client.close(),
    };
  }
  const client = new V2Client(
    { name: 'gatehouse-e2e-v2', version: '1.0.0' },
    {
      ...(mode.negotiation === undefined ? {} : { versionNegotiation: { mode: mode.negotiation } }),
      ...(mode.protocolVersions === undefined ? {} : { supportedProtocolVersions: mode.protocolVersions }),
    },
  );
  const options = { requestInit: { headers: { authorization: `Bearer ${key}` } }, fetch };
  await client.connect(mode.transport === 'sse' ? new V2SSEClientTransport(new URL(url), options) : new V2StreamableHTTPClientTransport(new URL(url), options));
  return {
    mode,
    era: client.getProtocolEra() ?? 'legacy',
    wire,
    listTools: async () => (await client.listTools()).tools,
    callTool: async (name, args) => client.callTool({ name, arguments: args }),
    close: () => client.close(),
  };
}

/** `fetch`, keeping every exchange in `wire` (the answer's body read from a clone, unless it is an event stream). */
function recordingFetch(wire: WireExchange[]): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const text = init?.body === undefined || init.body === null ? undefined : String(init.body);
    const response = await fetch(input, init);
    const streaming = (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
    wire.push({
      method: request.method,
      url: request.url,
      requestHeaders: request.headers,
      message: text === undefined ? undefined : JSON.parse(text),
      status: response.status,
      headers: response.headers,
      body: streaming ? Promise.resolve(undefined) : response.clone().text(),
    });
    return response;
  };
}

/** The exchange that posted `tools/call` for `tool` (the last one). */
export function toolCallExchange(wire: WireExchange[], tool: string): WireExchange | undefined {
  return wire.findLast((exchange) => {
    const message = exchange.message as { method?: unknown; params?: { name?: unknown } } | undefined;
    return message?.method === 'tools/call' && message.params?.name === tool;
  });
}
