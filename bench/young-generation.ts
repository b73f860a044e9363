/**
 * `node bench/young-generation.ts`: how large V8's young generation grows under `npm start`'s
 * node flags. V8 sizes it from the memory Node sees: up to 64 MB per semi-space on a large
 * machine, 1 MB under a 512 Mi container limit (docs/performance.md, "Memory settings").
 * `npm start` and the image pin it with `--max-semi-space-size=16`, so the gateway runs alike
 * everywhere. This checks V8's behaviour under that flag, not Gatehouse's code: it is a
 * measurement, not a test. Prints the largest size reached, and exits 1 unless it grew past
 * 16 MB and stayed within 40 MB.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { npmStart } from './npm-start.ts';

const MB = 1024 * 1024;
/** Grown past what a 512 Mi container would get (1 MB a semi-space)... */
const AT_LEAST = 16 * MB;
/**
 * ...and capped at 2 × 16 MB (unpinned it reaches 128 MB on the 24 GB machine). V8's figure at
 * times runs a few pages past the two semi-spaces while they are swapped: 32.25 and 35 MB were
 * seen, so the bound is 40 MB.
 */
const AT_MOST = 40 * MB;

/**
 * Keeps a third of what it allocates alive for a while, so every young collection has
 * survivors and V8 grows the young generation as far as it may; prints the largest size the
 * young generation (both semi-spaces) reached, in bytes.
 */
const GROW_YOUNG_GENERATION = `
const v8 = require('node:v8');
let kept = [];
let largest = 0;
for (let i = 0; i < 4e6; i++) {
  const object = { index: i, text: 'x' + i };
  if (i % 3 === 0) kept.push(object);
  if (kept.length > 300000) kept = [];
  if (i % 10000 === 0) {
    const young = v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space');
    largest = Math.max(largest, young.space_size);
  }
}
process.stdout.write(String(largest));
`;

/** The largest young generation, in bytes, of a Node process run with `flags`. */
export function largestYoungGeneration(flags: readonly string[]): number {
  return Number(execFileSync(process.execPath, [...flags, '-e', GROW_YOUNG_GENERATION], { encoding: 'utf8', timeout: 60_000 }));
}

if (import.meta.main) {
  const { flags } = npmStart(fileURLToPath(new URL('..', import.meta.url)));
  const problems: string[] = [];
  if (!flags.includes('--max-semi-space-size=16')) problems.push(`npm start's flags do not pin it: ${flags.join(' ')}`);
  const largest = largestYoungGeneration(flags);
  const mb = (bytes: number) => `${(bytes / MB).toFixed(2)} MB`;
  process.stdout.write(`young generation under npm start's flags (${flags.join(' ')}): largest ${mb(largest)}; expected > ${mb(AT_LEAST)} and ≤ ${mb(AT_MOST)}\n`);
  if (!(largest > AT_LEAST)) problems.push(`it stayed at ${mb(largest)}, not past ${mb(AT_LEAST)}`);
  if (!(largest <= AT_MOST)) problems.push(`it grew to ${mb(largest)}, past ${mb(AT_MOST)}`);
  for (const problem of problems) process.stderr.write(`young-generation: ${problem}\n`);
  process.exit(problems.length === 0 ? 0 : 1);
}
