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

  it('refuses a claimant it cannot track, even one that would have the turn, while all it tracks are waiting', () => {
    let now = ORIGIN;
    const gate = new MemoryProbeGate({ intervalMs: INTERVAL_MS, maxClaimants: 2, now: () => now });
    const at = (ms: number) => (now = ORIGIN + ms);
    const ask = (ms: number, claimant: string) => (at(ms), gate.tryPassSync('a', claimant));
    // A and B both pass once, then both wait again.
    expect([ask(0, 'A'), ask(100, 'B'), ask(500, 'A'), ask(1100, 'B'), ask(1500, 'B'), ask(2200, 'A'), ask(2500, 'A')]).toEqual([
      true,
      false,
      false,
      true,
      false,
      true,
      false,
    ]);
    // C never passed, so tracked it would have the free slot; it is not, so it is refused, and B (passed longest ago) has it.
    expect([ask(3300, 'C'), ask(3400, 'B')]).toEqual([false, true]);
  });

  it('is bounded: past maxSubjects the least recent subject is forgotten', () => {
    const gate = new MemoryProbeGate({ intervalMs: INTERVAL_MS, maxSubjects: 2, now: () => ORIGIN });
    for (const subject of ['a', 'b', 'c']) expect(gate.tryPassSync(subject, 'A')).toBe(true);
    expect(gate.tryPassSync('a', 'A')).toBe(true);
    expect(gate.tryPassSync('c', 'A')).toBe(false);
  });
});
