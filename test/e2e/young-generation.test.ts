import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { npmStart } from '../support/gateway-process.ts';

const MB = 1024 * 1024;

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

function largestYoungGeneration(flags: readonly string[]): number {
  return Number(execFileSync(process.execPath, [...flags, '-e', GROW_YOUNG_GENERATION], { encoding: 'utf8', timeout: 60_000 }));
}

/**
 * V8 sizes the young generation from the memory Node sees: up to 64 MB per semi-space on a
 * large machine, 1 MB under a 512 Mi container limit (docs/performance.md, "Memory settings"). `npm start` and the
 * image pin it, so the gateway runs alike everywhere.
 */
describe("npm start's node flags pin the young generation", () => {
  const { flags } = npmStart();

  it('grows to two semi-spaces of 16 MB and no further', () => {
    expect(flags).toContain('--max-semi-space-size=16');
    // Grown past what a 512 Mi container would get (1 MB a semi-space), capped at 2 × 16 MB
    // (unpinned it reaches 128 MB here). V8's figure at times runs a few pages past the two
    // semi-spaces while they are swapped: 32.25 and 35 MB were seen, so the bound is 40 MB.
    const largest = largestYoungGeneration(flags);
    expect(largest).toBeGreaterThan(16 * MB);
    expect(largest).toBeLessThanOrEqual(40 * MB);
  }, 60_000);
});
