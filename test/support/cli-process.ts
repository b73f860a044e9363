import { spawn } from 'node:child_process';
import { FAST_ARGON2, REPO_ROOT } from './gateway-process.ts';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON (for `--json`); throws when it is not JSON. */
  json<T = unknown>(): T;
}

/**
 * Runs `bin/gatehouse.js` as a user would (`node bin/gatehouse.js …`, the package's bin) with
 * `env` added to a minimal environment. `input` is piped to stdin, which is otherwise empty.
 */
export async function runCli(args: string[], env: Record<string, string> = {}, input?: string, timeoutMs = 30_000): Promise<CliResult> {
  const child = spawn(process.execPath, ['bin/gatehouse.js', ...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', ...FAST_ARGON2, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end(input ?? '');
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
  clearTimeout(timer);
  return {
    code,
    stdout,
    stderr,
    json<T>() {
      try {
        return JSON.parse(stdout) as T;
      } catch {
        throw new Error(`not JSON (exit ${code}):\n${stdout}\n${stderr}`);
      }
    },
  };
}
