import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Runs the server scenarios of the official MCP conformance suite
 * (@modelcontextprotocol/conformance) against one MCP endpoint and reads back what every
 * check of every scenario said.
 *
 * One CLI run per protocol era, because a run speaks one wire: `--spec-version 2025-11-25`
 * runs the scenarios of every dated revision up to it over the `initialize` handshake and
 * sessions; `--spec-version 2026-07-28` runs that revision's scenarios statelessly, with a
 * `_meta` envelope on every request. `--suite all` includes the scenarios the suite still
 * calls pending for its own reference fixture (json-schema-2020-12, server-sse-polling,
 * http-header-validation, http-custom-header-server-validation): ours passes them. An era
 * filter leaves out the extension scenarios (tasks-*, skills), which no fixture here
 * implements. `--requirements` is not used: it runs the set frozen at a revision's release,
 * which at 2026-07-28 leaves out json-schema-2020-12 and both SEP-2243 header scenarios, the
 * ones that exercise the gateway's own header checks.
 */

export const ERAS = ['2025-11-25', '2026-07-28'] as const;
export type Era = (typeof ERAS)[number];

export type CheckStatus = 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';

export interface Check {
  id: string;
  name: string;
  status: CheckStatus;
  errorMessage?: string;
  details?: unknown;
}

/** Keyed `<era>/<scenario>`, e.g. `2026-07-28/tools-list`: a scenario of both eras is two runs. */
export type SuiteResults = Map<string, Check[]>;

const CLI = fileURLToPath(new URL('../../node_modules/@modelcontextprotocol/conformance/dist/index.js', import.meta.url));

export async function runSuite(url: string, eras: readonly Era[] = ERAS): Promise<SuiteResults> {
  const results: SuiteResults = new Map();
  for (const era of eras) {
    for (const [scenario, checks] of await runEra(url, era)) results.set(`${era}/${scenario}`, checks);
  }
  return results;
}

/** One CLI run, its results written to a temporary directory that is removed once read. */
async function runEra(url: string, era: Era): Promise<Map<string, Check[]>> {
  const outputDir = await mkdtemp(join(tmpdir(), 'mcp-conformance-'));
  try {
    const args = [CLI, 'server', '--url', url, '--suite', 'all', '--spec-version', era, '--output-dir', outputDir];
    // The node running us is the repository's pinned Node 24 (`npx node`); the CLI gets the same.
    const run = await spawnCollect(process.execPath, args);
    const results = await readResults(outputDir);
    // Exit code 1 only says some check failed; no results at all means the CLI itself broke.
    if (results.size === 0) throw new Error(`conformance CLI (${era}) wrote no results, exit ${run.code}:\n${run.output}`);
    return results;
  } finally {
    await rm(outputDir, { recursive: true, force: true });
  }
}

/** `<outputDir>/server-<scenario>-<ISO timestamp with - for :>/checks.json`. */
async function readResults(outputDir: string): Promise<Map<string, Check[]>> {
  const results = new Map<string, Check[]>();
  for (const entry of (await readdir(outputDir)).sort()) {
    const scenario = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(entry)?.[1];
    if (scenario === undefined) continue;
    const checks = JSON.parse(await readFile(join(outputDir, entry, 'checks.json'), 'utf8')) as Check[];
    results.set(scenario, checks.map(({ id, name, status, errorMessage, details }) => ({ id, name, status, errorMessage, details })));
  }
  return results;
}

function spawnCollect(command: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
  });
}

/** A scenario's verdict: FAILURE if any check failed, else WARNING if any warned, else SUCCESS. */
export function verdict(checks: readonly Check[]): 'SUCCESS' | 'WARNING' | 'FAILURE' {
  if (checks.some((check) => check.status === 'FAILURE')) return 'FAILURE';
  return checks.some((check) => check.status === 'WARNING') ? 'WARNING' : 'SUCCESS';
}

/** `npx node test/conformance/run-suite.ts <mcp url>`: one line per scenario. */
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const url = process.argv[2];
  if (url === undefined) throw new Error('usage: run-suite.ts <mcp url>');
  for (const [scenario, checks] of await runSuite(url)) {
    const failed = checks.filter((check) => check.status === 'FAILURE').map((check) => check.name);
    console.log(`${verdict(checks).padEnd(7)} ${scenario}${failed.length > 0 ? `  (${failed.join(', ')})` : ''}`);
  }
}
