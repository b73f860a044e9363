import { describe, expect, it } from 'vitest';
import { MemoryProbeGate } from '../../../src/limits/probe-gate.ts';

describe('MemoryProbeGate', () => {
  it('lets one attempt per subject through per interval', () => {
    let now = 0;
    const gate = new MemoryProbeGate({ intervalMs: 1000, now: () => now });
    expect([gate.tryPassSync('a'), gate.tryPassSync('a'), gate.tryPassSync('b')]).toEqual([true, false, true]);
    now = 999;
    expect(gate.tryPassSync('a')).toBe(false);
    now = 1000;
    expect([gate.tryPassSync('a'), gate.tryPassSync('a')]).toEqual([true, false]);
  });

  it('forgets a pass that did not happen', () => {
    const gate = new MemoryProbeGate({ intervalMs: 1000, now: () => 0 });
    expect(gate.tryPassSync('a')).toBe(true);
    gate.forget('a');
    expect(gate.tryPassSync('a')).toBe(true);
  });

  it('is bounded: past maxSubjects the least recent subject is forgotten', () => {
    const gate = new MemoryProbeGate({ intervalMs: 1000, maxSubjects: 2, now: () => 0 });
    for (const subject of ['a', 'b', 'c']) expect(gate.tryPassSync(subject)).toBe(true);
    expect(gate.tryPassSync('a')).toBe(true);
    expect(gate.tryPassSync('c')).toBe(false);
  });
});
