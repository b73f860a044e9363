import { spawn } from 'node:child_process';

export interface ProcessResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to its end, as a reader of the docs would run it, without blocking this
 * process (the platform and the gateway's answers may be served here). stdin is closed:
 * Node's pipes are sockets, and bash reads ~/.bashrc when its stdin is one (its rsh detection).
 */
export async function runProcess(command: string, args: string[], options: { env: Record<string, string>; cwd?: string; timeoutMs?: number }): Promise<ProcessResult> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
  // 'close': the exit code once stdout and stderr are read to their end.
  const code = await new Promise<number | null>((resolve) => child.once('close', (exitCode) => resolve(exitCode)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}
