import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './gateway-process.ts';

/** `import { openStore } …` for a script run by runStoreScript. */
export const IMPORT_OPEN_STORE = `import { openStore } from ${JSON.stringify(pathToFileURL(join(REPO_ROOT, 'src/store/open.ts')).href)};`;

/**
 * Runs `script` (an ES module) as a process of its own with DATA_DIR set, and resolves once it
 * wrote `done` on a line: it then holds whatever it opened until it is killed. `nodeFlags`: Node's
 * own (`--expose-gc`).
 */
export async function runStoreScript(dataDir: string, script: string, nodeFlags: string[] = []): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...nodeFlags, '--input-type=module', '-e', script], {
    env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const look = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('done\n')) resolve();
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.once('exit', () => reject(new Error(`the process exited before it was done:\n${output}`)));
  });
  return child;
}

/** SIGKILL, and wait for the exit. */
export async function killHard(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}
