import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAST_ARGON2, REPO_ROOT, freePort } from '../support/gateway-process.ts';

const READY_LINE = 'Ctrl-C stops the demo';

/** Runs printed shell lines as a user pasting them would: one bash, in order. */
function sh(lines: string[]): { stdout: string; stderr: string; status: number | null } {
  const result = spawnSync('bash', ['-c', lines.join('\n')], { encoding: 'utf8', timeout: 30_000 });
  return { stdout: result.stdout, stderr: result.stderr, status: result.status };
}

describe('npm run demo', () => {
  let demo: ChildProcess;
  let output = '';
  let exited: Promise<number | null>;
  let commands: string[] = [];
  let opsPort: number;

  beforeAll(async () => {
    const port = await freePort();
    opsPort = await freePort();
    // What `npm run demo` runs, on free ports.
    demo = spawn(process.execPath, ['examples/demo.ts'], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', PORT: String(port), OPS_PORT: String(opsPort), ...FAST_ARGON2 },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    demo.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    demo.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    exited = new Promise((resolve) => demo.once('exit', (code) => resolve(code)));
    const deadline = Date.now() + 45_000;
    while (!output.includes(READY_LINE)) {
      if (demo.exitCode !== null) throw new Error(`the demo exited with ${demo.exitCode}:\n${output}`);
      if (Date.now() > deadline) throw new Error(`the demo did not get ready:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    commands = output.split('\n').filter((line) => /^(TOKEN=\$\(curl |CREATED=\$\(curl |curl )/.test(line));
  }, 60_000);
  afterAll(async () => {
    if (demo?.exitCode === null) {
      demo.kill('SIGKILL');
      await exited;
    }
  });

  it('prints the admin login, a link to /docs and five ready-to-paste curl lines', () => {
    expect(output).toMatch(/Admin login: {2}admin@gatehouse\.local {2}\/ {2}\S{8,}/);
    expect(output).toMatch(/API reference: http:\/\/127\.0\.0\.1:\d+\/docs/);
    expect(commands).toHaveLength(5);
  });

  it('the login, create-key and event lines work as printed', async () => {
    const run = sh([...commands.slice(0, 3), 'echo "TOKEN=$TOKEN"', 'echo "KEY=$KEY"']);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^TOKEN=[\w-]+\.[\w-]+\.[\w-]+$/m);
    expect(run.stdout).toMatch(/^KEY=ghk_[A-Za-z0-9]{46}$/m);
    // The create line shows the record before keeping the key.
    expect(run.stdout).toMatch(/^\{"id":1,.*"status":"active".*"key":"ghk_/m);
    expect(run.stdout).toContain('{"accepted":true}');
    expect(run.stdout).toMatch(/^HTTP 202$/m);
    // The platform behind the gateway received the event, from key 1 (its log line is read once bash is done).
    await expect.poll(() => output, { timeout: 5_000 }).toMatch(/event agent=7 key=1 \d+ bytes/);
  });

  it('the MCP lines answer as docs/mcp.md says: three tools listed, the unscoped call refused with 403', (context) => {
    const run = sh([...commands.slice(0, 2), ...commands.slice(3)]);
    expect(run.status, run.stderr).toBe(0);
    if (run.stdout.includes('MCP requests are not forwarded by this version')) {
      context.skip('MCP inspection is not in this build yet: the gateway refuses every MCP request');
    }
    const answers = [...run.stdout.matchAll(/^(\{.*\})\nHTTP (\d{3})$/gm)].map((match) => ({ body: JSON.parse(match[1]!), status: Number(match[2]) }));
    expect(answers).toHaveLength(2);
    const [list, call] = answers as [{ body: { result: { tools: Array<{ name: string }> } }; status: number }, { body: { error: { data: { code: string } } }; status: number }];
    expect(list.status).toBe(200);
    expect(list.body.result.tools.map((tool) => tool.name).sort()).toEqual(['get_agent_status', 'list_agents', 'search_knowledge_base']);
    expect(call.status).toBe(403);
    expect(call.body.error.data.code).toBe('insufficient_scope');
  });

  it('stops cleanly on Ctrl-C: the gateway drains, the demo exits 0', async () => {
    demo.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(output).toContain('demo stopped');
    await expect(fetch(`http://127.0.0.1:${opsPort}/healthz`)).rejects.toThrow();
  });
});
