import { describe, expect, it } from 'vitest';
import { MemoryProbeGate } from '../../../src/limits/probe-gate.ts';
import { MAX_CLAIMANTS, PROBE_CASES, runProbeCase, WAIT_MEMORY_INTERVALS } from '../../support/probe-gate-cases.ts';

const INTERVAL_MS = 1000;
/** A clock far from 0, as Date.now is. */
const ORIGIN = 1_700_000_000_000;

describe('MemoryProbeGate', () => {
  it.each(PROBE_CASES.map((testCase) => [testCase.name, testCase] as const))('%s', async (_name, testCase) => {
    let now = ORIGIN;
    const gate = new MemoryProbeGate({ intervalMs: INTERVAL_MS, waitMemoryMs: WAIT_MEMORY_INTERVALS * INTERVAL_MS, maxClaimants: MAX_CLAIMANTS, now: () => now });
    await runProbeCase(
      testCase,
      (at) => {
        now = ORIGIN + Math.round(at * INTERVAL_MS);
      },
      (claimant) => gate.tryPass('ghk_Ab3dEf9h', claimant),
    );
  });

  it('keeps subjects apart', () => {
    const gate = new MemoryProbeGate({ intervalMs: INTERVAL_MS, now: () => ORIGIN });
    expect([gate.tryPassSync('a', 'A'), gate.tryPassSync('a', 'A'), gate.tryPassSync('b', 'A'), gate.tryPassSync('a', 'B')]).toEqual([true, false, true, false]);
  });

  it('takes decisions made elsewhere into its line', () => {
    let now = ORIGIN;
    const gate = new MemoryProbeGate({ intervalMs: INTERVAL_MS, now: () => now });
    gate.record('a', 'A', true);
    gate.record('a', 'B', false);
    expect(gate.tryPassSync('a', 'A')).toBe(false);
    now += INTERVAL_MS;
    // B waits, and never passed: its turn.
    expect([gate.tryPassSync('a', 'A'), gate.tryPassSync('a', 'B')]).toEqual([false, true]);
  });

  it('a newcomer behind a flood from a thousand addresses passes at the first free slot, and the flood at one a second', () => {
    let now = ORIGIN;
    const gate = new MemoryProbeGate({ intervalMs: INTERVAL_MS, now: () => now });
    const passes: { at: number; claimant: string }[] = [];
    const ask = (claimant: string) => {
      if (gate.tryPassSync('a', claimant)) passes.push({ at: now - ORIGIN, claimant });
    };
    // Every address asks every 100 ms; the newcomer first at 5,050 ms, then after each Retry-After.
    for (let ms = 0; ms < 8_000; ms += 10) {
      now = ORIGIN + ms;
      for (let address = ms % 100; address < 1_000; address += 10) ask(`10.0.${address >> 8}.${address & 255}`);
      if (ms >= 5_050 && (ms - 5_050) % 1_000 === 0) ask('192.0.2.1');
    }
    const served = passes.findIndex(({ claimant }) => claimant === '192.0.2.1');
    expect(served).toBeGreaterThan(0);
    // The first pass after it first asked is its own.
    expect(passes[served - 1]!.at).toBeLessThan(5_050);
    // One a second, never more.
    for (let i = 1; i < passes.length; i++) expect(passes[i]!.at - passes[i - 1]!.at).toBeGreaterThanOrEqual(INTERVAL_MS);
    expect(passes.length).toBeGreaterThanOrEqual(7);
  });

  it('is bounded: past maxSubjects the least recent subject is forgotten', () => {
    const gate = new MemoryProbeGate({ intervalMs: INTERVAL_MS, maxSubjects: 2, now: () => ORIGIN });
    for (const subject of ['a', 'b', 'c']) expect(gate.tryPassSync(subject, 'A')).toBe(true);
    expect(gate.tryPassSync('a', 'A')).toBe(true);
    expect(gate.tryPassSync('c', 'A')).toBe(false);
  });
});
