import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** `npm start`'s command line taken apart: `[NAME=value …] node [flags] <script>`. */
export interface NpmStart {
  /** Leading `NAME=value` words: the process's environment, as sh reads them. */
  env: Record<string, string>;
  flags: string[];
  script: string;
}

/**
 * Reads `npm start` from package.json under `root`, so that the benchmark and the tests run the
 * gateway as it is deployed. Throws if the script is not of that one shape.
 */
export function npmStart(root: string): NpmStart {
  const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } };
  const words = scripts.start.trim().split(/\s+/);
  const env: Record<string, string> = {};
  while (/^[A-Z_][A-Z0-9_]*=/.test(words[0] ?? '')) {
    const [name, ...value] = words.shift()!.split('=');
    env[name!] = value.join('=');
  }
  const [command, ...args] = words;
  const script = args.pop();
  if (command !== 'node' || script === undefined || args.some((arg) => !arg.startsWith('-'))) {
    throw new Error(`npm start is not "[VAR=value …] node [flags] <script>": ${scripts.start}`);
  }
  return { env, flags: args, script };
}
