import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlatform, type Platform } from '../../examples/platform/platform.ts';
import { REPO_ROOT, startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin } from '../support/http.ts';
import { runProcess } from '../support/run-process.ts';

const EXAMPLES = ['examples/mcp-clients/list-tools-sdk-v1.ts', 'examples/mcp-clients/list-tools-sdk-v2.ts'];

/** docs/mcp.md, "Connecting a client", up to the next section. */
function connectingSection(): string {
  const doc = readFileSync(join(REPO_ROOT, 'docs/mcp.md'), 'utf8');
  const start = doc.indexOf('\n## Connecting a client\n');
  expect(start).toBeGreaterThan(-1);
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end === -1 ? undefined : end);
}

/** Runs an example as a reader would: `node <file>`. */
function runExample(file: string, env: Record<string, string>) {
  return runProcess(process.execPath, [file], { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? '', ...env } });
}

describe('docs/mcp.md, "Connecting a client"', () => {
  it.each(EXAMPLES)('shows %s exactly as the file the tests run', (file) => {
    const shown = new RegExp(`<!-- example: ${file.replaceAll('.', '\\.')} -->\\n\`\`\`ts\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(connectingSection());
    expect(shown, `no block for ${file}`).not.toBeNull();
    expect(shown![1]).toBe(readFileSync(join(REPO_ROOT, file), 'utf8').trimEnd());
  });

  it('gives client configurations that are JSON, each sending the key as a Bearer Authorization header', () => {
    const blocks = [...connectingSection().matchAll(/```json\n([\s\S]*?)\n```/g)].map((match) => JSON.parse(match[1]!));
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    for (const block of blocks) {
      const server = block.mcpServers.gatehouse;
      const authorization = server.headers?.Authorization ?? server.env?.AUTH_HEADER;
      expect(authorization).toMatch(/^Bearer /);
      if (server.url !== undefined) expect(server.url).toMatch(/\/mcp$/);
      else expect(server.args).toContain('Authorization:${AUTH_HEADER}');
    }
  });
});

describe('the TypeScript examples, run against the example platform behind a gateway', { timeout: 120_000 }, () => {
  let platform: Platform;
  let gateway: GatewayProcess;
  let key: string;

  beforeAll(async () => {
    // What `npm run demo` runs: a stateless MCP server answering JSON.
    platform = await startPlatform({ quiet: true, stateful: false, sseMode: 'json' });
    gateway = await startGateway({ UPSTREAM_URL: platform.url });
    const token = await loginAdmin(gateway.url);
    key = (await createKey(gateway.url, token, { name: 'docs example', scopes: ['mcp:agents', 'mcp:knowledge'] })).body.key;
  });
  afterAll(async () => {
    await gateway?.stop();
    await platform?.close();
  });

  it.each(EXAMPLES)('%s lists the tools the key may call, its key never forwarded', async (file) => {
    platform.reset();
    const run = await runExample(file, { GATEHOUSE_MCP_URL: `${gateway.url}/mcp`, GATEHOUSE_KEY: key });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim().split('\n').sort()).toEqual(['get_agent_status', 'list_agents', 'search_knowledge_base']);
    const mcpRequests = platform.requests.filter((received) => received.url === '/mcp');
    expect(mcpRequests.length).toBeGreaterThan(0);
    for (const received of mcpRequests) {
      expect(received.headers.authorization).toBeUndefined();
      expect(received.headers['x-auth-kind']).toBe('api_key');
    }
  });

  it.each(EXAMPLES)('%s is refused with a key that is no key: nothing reaches the tool server', async (file) => {
    platform.reset();
    const run = await runExample(file, { GATEHOUSE_MCP_URL: `${gateway.url}/mcp`, GATEHOUSE_KEY: `${key.slice(0, -4)}xxxx` });
    expect(run.code).not.toBe(0);
    expect(run.stdout).toBe('');
    expect(platform.requests).toHaveLength(0);
  });
});
