import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnswerHeaderShim, type LoopbackForwarder } from '../support/loopback-forwarder.ts';
import { connectAs, type ClientMode, type GenerationClient, type McpUrls } from '../support/mcp-clients.ts';
import { initialize, postRpc, startMcpStack, type McpStack } from '../support/mcp.ts';

// Issue 32, item 3: a filtered tools/list answer kept the platform's `Cache-Control: public,
// max-age=300`, so a shared cache could keep one key's list and serve it to another key.
// Every answer the gateway relays on an MCP path now carries its own `Cache-Control`
// (docs/mcp.md), whatever the upstream said, in every revision. The upstream here is the
// example platform behind a shim that marks every one of its answers public.

const PUBLIC = 'public, max-age=300';
/** What the upstream says to CDNs (RFC 9213 and the CDNs' own fields): each would let one share an answer all the same. */
const FOR_CDNS = {
  'CDN-Cache-Control': PUBLIC,
  'Cloudflare-CDN-Cache-Control': 'max-age=300',
  'Surrogate-Control': 'max-age=300',
  'Edge-Control': 'cache-maxage=300s',
  'X-Accel-Expires': '300',
};
const AGENT_TOOLS = ['get_agent_status', 'list_agents'];
const LEGACY_PATHS = { legacySsePath: '/sse', legacyMessagesPath: '/messages' };
const LEGACY_ENV = { MCP_SSE_PATH: '/sse', MCP_MESSAGES_PATH: '/messages' };

/** [revision, the client that speaks it]. */
const V2_REVISIONS: Array<[string, ClientMode]> = [
  ['2025-03-26', { label: '2.x offering 2025-03-26', sdk: 'v2', transport: 'streamable', negotiation: 'legacy', protocolVersions: ['2025-03-26'], era: 'legacy' }],
  ['2025-06-18', { label: '2.x offering 2025-06-18', sdk: 'v2', transport: 'streamable', negotiation: 'legacy', protocolVersions: ['2025-06-18'], era: 'legacy' }],
  ['2025-11-25', { label: '2.x, its default', sdk: 'v2', transport: 'streamable', era: 'legacy' }],
  ['2026-07-28', { label: '2.x pinned to 2026-07-28', sdk: 'v2', transport: 'streamable', negotiation: { pin: '2026-07-28' }, era: 'modern' }],
];
const LEGACY_SSE: ClientMode = { label: '1.x over legacy HTTP+SSE', sdk: 'v1', transport: 'sse', era: 'legacy' };

/**
 * The platform of `sdk` behind the shim, the gateway in front of both and a key with
 * mcp:agents, for the enclosing describe (made before its tests, closed after them).
 */
function behindShim(sdk: 'v1' | 'v2'): { stack: McpStack; shim: LoopbackForwarder; urls: McpUrls; key: string } {
  const parts = {} as { stack: McpStack; shim: LoopbackForwarder; urls: McpUrls; key: string };
  beforeAll(async () => {
    parts.shim = await startAnswerHeaderShim({ 'Cache-Control': PUBLIC, ...FOR_CDNS });
    const upstream = { UPSTREAM_URL: parts.shim.url };
    parts.stack = sdk === 'v1' ? await startMcpStack(LEGACY_PATHS, { ...LEGACY_ENV, ...upstream }) : await startMcpStack({ sdk }, upstream);
    parts.shim.forwardTo(parts.stack.platform.url);
    parts.urls = { mcpUrl: parts.stack.mcpUrl, sseUrl: `${parts.stack.gateway.url}/sse` };
    ({ key: parts.key } = await parts.stack.key(['mcp:agents']));
  });
  afterAll(async () => {
    await parts.stack?.close();
    await parts.shim?.close();
  });
  return parts;
}

/** Connects a client of `mode`, lists and calls through it: see `expectNoAnswerShareable`. */
async function checkRevision(behind: ReturnType<typeof behindShim>, mode: ClientMode, revision: string): Promise<void> {
  const client = await connectAs(mode, behind.urls, behind.key);
  try {
    await expectNoAnswerShareable(client, behind.shim, revision);
  } finally {
    await client.close();
  }
}

/** None of the upstream's cache fields for CDNs went out. */
function expectNoCdnFields(headers: Headers): void {
  for (const name of Object.keys(FOR_CDNS)) expect(headers.get(name), name).toBeNull();
}

const isToolsList = (message: unknown) => (message as { method?: unknown } | undefined)?.method === 'tools/list';

/** Lists and calls through `client`; then every answer it had came with the gateway's Cache-Control, none with the upstream's. */
async function expectNoAnswerShareable(client: GenerationClient, shim: LoopbackForwarder, revision: string): Promise<void> {
  const before = shim.answered();
  expect((await client.listTools()).map((tool) => tool.name).sort()).toEqual(AGENT_TOOLS);
  expect((await client.callTool('list_agents', {})).isError).toBeFalsy();
  // The premise: the platform's answers, list included, came to the gateway marked public.
  expect(shim.answered()).toBeGreaterThan(before);
  const relayed = client.wire.filter((exchange) => exchange.status < 400);
  expect(relayed.length).toBeGreaterThan(0);
  for (const exchange of relayed) {
    expect(exchange.headers.get('cache-control'), `${exchange.method} ${exchange.url} (${exchange.status})`).toBe('no-store, no-transform');
    expectNoCdnFields(exchange.headers);
  }
  const listed = client.wire.findLast((exchange) => isToolsList(exchange.message));
  if (client.mode.transport === 'streamable') {
    expect(listed?.requestHeaders.get('mcp-protocol-version')).toBe(revision);
    // A JSON answer, read here: filtered, and where the revision has cache hints, marked private too.
    const body = JSON.parse((await listed!.body)!);
    expect(body.result.tools.map((tool: { name: string }) => tool.name).sort()).toEqual(AGENT_TOOLS);
    if (revision === '2026-07-28') expect(body.result.cacheScope).toBe('private');
  } else {
    // The legacy transport answers its posts on the stream the GET opened: that answer is checked above too.
    expect(client.wire.some((exchange) => exchange.method === 'GET' && exchange.headers.get('content-type')?.startsWith('text/event-stream'))).toBe(true);
  }
}

describe('MCP answers are never shared-cacheable, whatever the upstream sends', () => {
  describe('2.x platform: Streamable HTTP revisions', () => {
    const behind = behindShim('v2');

    it.each(V2_REVISIONS)('%s: every answer carries Cache-Control: no-store, the tools list filtered', (revision, mode) => checkRevision(behind, mode, revision));

    it('an answer without a body (a notification\'s 202) and a session\'s opening carry it too', async () => {
      const { stack, shim, key } = behind;
      const opened = await postRpc(stack.mcpUrl, initialize(), { key });
      expect(opened.status).toBe(200);
      expect(opened.headers.get('cache-control')).toBe('no-store, no-transform');
      expectNoCdnFields(opened.headers);
      const sessionId = opened.headers.get('mcp-session-id')!;
      const before = shim.answered();
      const accepted = await postRpc(stack.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, { key, sessionId });
      expect(accepted.status).toBe(202);
      expect(accepted.text).toBe('');
      expect(shim.answered()).toBe(before + 1);
      expect(accepted.headers.get('cache-control')).toBe('no-store, no-transform');
      expectNoCdnFields(accepted.headers);
    });
  });

  describe('1.x platform: the legacy HTTP+SSE transport', () => {
    const behind = behindShim('v1');

    it('2024-11-05: the stream and every post\'s answer carry Cache-Control: no-store, the tools list filtered', () => checkRevision(behind, LEGACY_SSE, '2024-11-05'));
  });
});
