/**
 * `npm run demo`: the example agent platform with the gateway in front of it, on a fresh
 * embedded store in a temporary directory; prints an admin login and ready-to-paste curl
 * lines, and stops cleanly (store removed) on Ctrl-C.
 *
 * Environment: PORT (8080) and OPS_PORT (8081) of the gateway, HOST (127.0.0.1),
 * LOG_LEVEL of the gateway (warn).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPlatform } from './platform/platform.ts';

const REPO_ROOT = new URL('..', import.meta.url).pathname;
const ADMIN_EMAIL = 'admin@gatehouse.local';
const AGENT_ID = 7;
const STARTUP_TIMEOUT_MS = 30_000;

export interface DemoInstructions {
  baseUrl: string;
  email: string;
  password: string;
}

/**
 * The lines the demo prints. Each command is one line, runnable as printed in a POSIX shell
 * with curl and sed only; what each answers is what docs/api-keys.md and docs/mcp.md promise.
 */
export function demoInstructions({ baseUrl, email, password }: DemoInstructions): string[] {
  const json = "-H 'content-type: application/json'";
  const mcp = `${json} -H 'accept: application/json, text/event-stream'`;
  const field = (name: string) => `sed -n 's/.*"${name}":"\\([^"]*\\)".*/\\1/p'`;
  const login = JSON.stringify({ email, password });
  const key = JSON.stringify({ name: 'demo key', agent_id: AGENT_ID, scopes: ['events:write', 'mcp:agents', 'mcp:knowledge'] });
  const event = JSON.stringify({ type: 'call.started', call_id: 'c-1001' });
  const list = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
  const call = JSON.stringify({
    jsonrpc: '2.0',
    id: 2,
    method: 'tools/call',
    params: { name: 'place_outbound_call', arguments: { to: '+15550100', agent_id: AGENT_ID } },
  });
  return [
    `  Admin login:  ${email}  /  ${password}`,
    `  API reference: ${baseUrl}/docs`,
    '',
    '  Paste these in another shell (curl and sed are all they need):',
    '',
    '# 1. Log in as the admin; the session token goes to $TOKEN',
    `TOKEN=$(curl -s ${baseUrl}/api/v1/auth/login ${json} -d '${login}' | ${field('token')}); echo "$TOKEN"`,
    '',
    `# 2. Create an API key for agent ${AGENT_ID} (events, and two MCP scopes): 201 with the record; the raw key, shown once, goes to $KEY`,
    `CREATED=$(curl -s ${baseUrl}/api/v1/api-keys -H "authorization: Bearer $TOKEN" ${json} -d '${key}'); echo "$CREATED"; KEY=$(echo "$CREATED" | ${field('key')})`,
    '',
    `# 3. Send an event as agent ${AGENT_ID}: 202 from the platform, which logs what it received`,
    `curl -s -w '\\nHTTP %{http_code}\\n' ${baseUrl}/api/v1/agents/${AGENT_ID}/events -H "authorization: Bearer $KEY" ${json} -d '${event}'`,
    '',
    '# 4. List the MCP tools: only the three this key may call (list_agents, get_agent_status, search_knowledge_base)',
    `curl -s -w '\\nHTTP %{http_code}\\n' ${baseUrl}/mcp -H "authorization: Bearer $KEY" ${mcp} -d '${list}'`,
    '',
    '# 5. Call a tool the key has no scope for: 403, a JSON-RPC error whose data.code is insufficient_scope (it needs mcp:calls)',
    `curl -s -w '\\nHTTP %{http_code}\\n' ${baseUrl}/mcp -H "authorization: Bearer $KEY" ${mcp} -d '${call}'`,
    '',
  ];
}

async function main(): Promise<void> {
  const env = process.env;
  const host = env['HOST'] ?? '127.0.0.1';
  const port = env['PORT'] ?? '8080';
  const opsPort = env['OPS_PORT'] ?? '8081';
  const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-demo-'));
  const password = randomBytes(12).toString('base64url');
  // Stateless MCP, so a bare `tools/list` needs no `initialize` first: curl-friendly.
  const platform = await startPlatform({ port: 0, stateful: false, sseMode: 'json', recordLimit: 1000 });
  process.stdout.write(`example agent platform on ${platform.url} (events sink and MCP server, nine tools)\n`);

  // Exactly what `gatehouse serve` runs, on the embedded store, in front of the platform.
  const gateway = spawn(process.execPath, ['bin/gatehouse.js', 'serve'], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...env,
      HOST: host,
      PORT: port,
      OPS_PORT: opsPort,
      UPSTREAM_URL: platform.url,
      DATA_DIR: dataDir,
      DATABASE_URL: '',
      REDIS_URL: '',
      ADMIN_EMAIL,
      ADMIN_PASSWORD: password,
      LOG_LEVEL: env['LOG_LEVEL'] ?? 'warn',
    },
  });
  const exited = new Promise<number | null>((resolve) => gateway.once('exit', (code) => resolve(code)));

  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    if (gateway.exitCode === null && gateway.signalCode === null) gateway.kill('SIGTERM');
    await exited;
    await platform.close();
    rmSync(dataDir, { recursive: true, force: true });
    process.stdout.write('demo stopped\n');
    process.exit(code);
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void stop(0));
  void exited.then((code) => {
    if (!stopping) {
      process.stderr.write(`demo: the gateway exited (${code}); stopping\n`);
      void stop(1);
    }
  });

  const displayHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  try {
    // /readyz: the ops port answers /healthz from the first moment, /readyz 200 once the gateway listens.
    await waitForHealth(`http://${displayHost}:${opsPort}/readyz`, () => stopping);
  } catch (error) {
    process.stderr.write(`demo: ${(error as Error).message}\n`);
    return stop(1);
  }
  if (stopping) return;
  const lines = demoInstructions({ baseUrl: `http://${displayHost}:${port}`, email: ADMIN_EMAIL, password });
  process.stdout.write(['', '  Gatehouse demo is running.', '', ...lines, '  Ctrl-C stops the demo and deletes its store.', ''].join('\n') + '\n');
}

async function waitForHealth(url: string, gaveUp: () => boolean): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (!gaveUp()) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the gateway did not answer ${url} within ${STARTUP_TIMEOUT_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    process.stderr.write(`demo: ${(error as Error).message}\n`);
    process.exit(1);
  });
}
