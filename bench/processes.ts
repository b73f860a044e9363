import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';

export { freePort } from '../test/support/free-port.ts';

export const REPO_ROOT = new URL('..', import.meta.url).pathname;

/** A server the benchmark started; `stop` ends it (SIGTERM, then SIGKILL after 5 s). */
export interface Spawned {
  name: string;
  pid: number;
  child: ChildProcess;
  output(): string;
  /** Resident set size in bytes, read from /proc (undefined where there is no /proc). */
  rss(): number | undefined;
  /** The highest RSS the process has had so far (VmHWM), in bytes. */
  peakRss(): number | undefined;
  stop(): Promise<void>;
}

export interface SpawnOptions {
  name: string;
  command: string;
  args: string[];
  env?: Record<string, string>;
  /** Polled until it answers with any HTTP status. */
  readyUrl: string;
  timeoutMs?: number;
}

/** Spawns a server process and waits until `readyUrl` answers. Its output is kept for error reports. */
export async function spawnServer(options: SpawnOptions): Promise<Spawned> {
  const child = spawn(options.command, options.args, {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const spawned: Spawned = {
    name: options.name,
    pid: child.pid ?? -1,
    child,
    output: () => output,
    rss: () => statusBytes(child.pid, 'VmRSS'),
    peakRss: () => statusBytes(child.pid, 'VmHWM'),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${options.name} exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${output}`);
    }
    if (await answers(options.readyUrl)) return spawned;
    if (Date.now() > deadline) {
      await spawned.stop();
      throw new Error(`${options.name} did not answer ${options.readyUrl} in time:\n${output}`);
    }
    await sleep(50);
  }
}

/** Runs a node script to completion; rejects with its output when it fails. */
export async function runNode(script: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const child = spawn(process.execPath, [script, ...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`${script} failed (${code}):\n${output}`);
  return output;
}

async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    await response.arrayBuffer();
    // 503: listening but not ready yet (the gateway's /readyz while it starts).
    return response.status !== 503;
  } catch {
    return false;
  }
}

function statusBytes(pid: number | undefined, field: 'VmRSS' | 'VmHWM'): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
