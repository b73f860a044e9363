import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { npmStart as readNpmStart, type NpmStart } from '../../bench/npm-start.ts';
import { freePort } from './free-port.ts';

export { freePort };

export const REPO_ROOT = new URL('../..', import.meta.url).pathname;
export const ADMIN_EMAIL = 'ops@example.test';
export const ADMIN_PASSWORD = 'correct horse battery staple';

/** `npm start` taken apart (`NAME=value … node <flags> <script>`), as the benchmark reads it. */
export function npmStart(): NpmStart {
  return readNpmStart(REPO_ROOT);
}

/** Cheap argon2 for tests that are not about argon2: the format and code path stay the same. */
export const FAST_ARGON2 = { ARGON2_MEMORY_KIB: '1024', ARGON2_TIME_COST: '1' };

export interface GatewayProcess {
  url: string;
  opsUrl: string;
  env: Record<string, string>;
  child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** SIGTERM, then wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  kill(): Promise<void>;
}

/** A fresh, empty DATA_DIR: the gateway creates its SQLite store there, migrations and all. */
export function tempDataDir(): string {
  return mkdtempSync(join(tmpdir(), 'gatehouse-test-'));
}

/** The same as tempDataDir(), named for tests that are about a first start on a new machine. */
export function emptyDataDir(): string {
  return tempDataDir();
}

/**
 * Spawns the gateway as a process of its own and waits until `/readyz` answers 200: from the
 * sources (`node src/main.ts`, the same code `npm start` compiles and runs from dist/), or
 * from `entry`. `env` is added to a minimal environment; the data dir defaults to a fresh
 * temporary directory.
 */
export async function startGateway(env: Record<string, string> = {}, entry = 'src/main.ts', nodeFlags: string[] = []): Promise<GatewayProcess> {
  const port = env.PORT ? Number(env.PORT) : await freePort();
  const opsPort = env.OPS_PORT ? Number(env.OPS_PORT) : await freePort();
  const fullEnv: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOST: '127.0.0.1',
    DATA_DIR: tempDataDir(),
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    LOG_LEVEL: 'info',
    ...FAST_ARGON2,
    ...env,
    PORT: String(port),
    OPS_PORT: String(opsPort),
  };
  const child = spawn(process.execPath, [...nodeFlags, entry], { cwd: REPO_ROOT, env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const opsUrl = `http://127.0.0.1:${opsPort}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`gateway exited with ${child.exitCode}:\n${output}`);
    // /readyz, not /healthz: the ops listener answers from the start, /readyz 200 once the gateway listens.
    if (await answers(`${opsUrl}/readyz`)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gateway did not start in 60 s:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url,
    opsUrl,
    env: fullEnv,
    child,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
    kill: async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Runs the entry point to completion (for start-up failures); resolves with exit code and output. */
export async function runGateway(env: Record<string, string>, timeoutMs = 20_000): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', DATA_DIR: tempDataDir(), ...FAST_ARGON2, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
  clearTimeout(timer);
  return { code, output };
}

async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(url);
    await response.arrayBuffer();
    return response.ok;
  } catch {
    return false;
  }
}
