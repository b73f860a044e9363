/**
 * Runs the example agent platform: `npx node examples/platform/main.ts`.
 *
 * Environment: PORT (3000), HOST (127.0.0.1), MCP_PATH (/mcp), MCP_RESPONSE_MODE (json | sse, json),
 * MCP_STATEFUL (true | false, true), MCP_SSE_PATH and MCP_MESSAGES_PATH (legacy transport, unset),
 * QUIET (true | false, false), RECORD_LIMIT (1000: what it keeps in memory per record).
 */
import { startPlatform } from './platform.ts';

const env = process.env;
const responseMode = env['MCP_RESPONSE_MODE'] ?? 'json';
if (responseMode !== 'json' && responseMode !== 'sse') {
  console.error(`MCP_RESPONSE_MODE must be json or sse, got ${responseMode}`);
  process.exit(1);
}

const platform = await startPlatform({
  port: Number(env['PORT'] ?? 3000),
  host: env['HOST'] ?? '127.0.0.1',
  mcpPath: env['MCP_PATH'] ?? '/mcp',
  sseMode: responseMode,
  stateful: env['MCP_STATEFUL'] !== 'false',
  ...(env['MCP_SSE_PATH'] === undefined ? {} : { legacySsePath: env['MCP_SSE_PATH'] }),
  ...(env['MCP_MESSAGES_PATH'] === undefined ? {} : { legacyMessagesPath: env['MCP_MESSAGES_PATH'] }),
  quiet: env['QUIET'] === 'true',
  recordLimit: Number(env['RECORD_LIMIT'] ?? 1000),
});
console.log(`example agent platform on ${platform.url} (MCP at ${platform.mcpUrl}, ${responseMode}, ${env['MCP_STATEFUL'] === 'false' ? 'stateless' : 'stateful'})`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void platform.close().then(() => process.exit(0));
  });
}
