/**
 * Runs the example agent platform: `npx node examples/platform/main.ts`.
 *
 * Environment: PORT (3000), HOST (127.0.0.1), MCP_PATH (/mcp), MCP_SDK (v1 | v2, v1: the MCP server of
 * `@modelcontextprotocol/sdk` 1.x, or of `@modelcontextprotocol/server` 2.x, which also serves the
 * 2026-07-28 era), MCP_RESPONSE_MODE (json | sse, json), MCP_STATEFUL (true | false, true),
 * MCP_SSE_PATH and MCP_MESSAGES_PATH (legacy transport, unset; v1 only),
 * QUIET (true | false, false), RECORD_LIMIT (1000: what it keeps in memory per record).
 */
import { startPlatform } from './platform.ts';

const env = process.env;
const responseMode = env['MCP_RESPONSE_MODE'] ?? 'json';
if (responseMode !== 'json' && responseMode !== 'sse') {
  console.error(`MCP_RESPONSE_MODE must be json or sse, got ${responseMode}`);
  process.exit(1);
}

const sdk = env['MCP_SDK'] ?? 'v1';
if (sdk !== 'v1' && sdk !== 'v2') {
  console.error(`MCP_SDK must be v1 or v2, got ${sdk}`);
  process.exit(1);
}

const platform = await startPlatform({
  port: Number(env['PORT'] ?? 3000),
  host: env['HOST'] ?? '127.0.0.1',
  mcpPath: env['MCP_PATH'] ?? '/mcp',
  sdk,
  sseMode: responseMode,
  stateful: env['MCP_STATEFUL'] !== 'false',
  ...(env['MCP_SSE_PATH'] === undefined ? {} : { legacySsePath: env['MCP_SSE_PATH'] }),
  ...(env['MCP_MESSAGES_PATH'] === undefined ? {} : { legacyMessagesPath: env['MCP_MESSAGES_PATH'] }),
  quiet: env['QUIET'] === 'true',
  recordLimit: Number(env['RECORD_LIMIT'] ?? 1000),
});
console.log(`example agent platform on ${platform.url} (MCP at ${platform.mcpUrl}, SDK ${sdk}, ${responseMode}, ${env['MCP_STATEFUL'] === 'false' ? 'stateless' : 'stateful'})`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void platform.close().then(() => process.exit(0));
  });
}
