/**
 * The probe gate's rule as a table (docs/security.md, "Guesses behind a real key's prefix"),
 * run against MemoryProbeGate with a frozen clock and against the Redis script in real time.
 * Times are in probe intervals; the wait memory is 3 intervals, MAX_CLAIMANTS claimants are remembered. Steps keep clear of the
 * moments a slot or a wait ends, so that a real clock's jitter cannot change an answer.
 */
import { expect } from 'vitest';

export const WAIT_MEMORY_INTERVALS = 3;
/** Claimants remembered per subject in these cases (the gates are given it). */
export const MAX_CLAIMANTS = 16;

export interface ProbeStep {
  at: number;
  claimant: string;
  /** The expected answer; unset: checked by the case's `passers`. */
  passes?: boolean;
}

export interface ProbeCase {
  name: string;
  steps: ProbeStep[];
  /** Who passed, in order, when the steps' own answers are not pinned. */
  passers?: (passers: string[], passes: { claimant: string; at: number }[]) => void;
}

/** `claimant` asking every `every` intervals, from `from` until before `to`. */
function flood(claimant: string, from: number, to: number, every: number): ProbeStep[] {
  const steps: ProbeStep[] = [];
  for (let i = 0; from + i * every < to; i++) steps.push({ at: Math.round((from + i * every) * 1000) / 1000, claimant });
  return steps;
}

const step = (at: number, claimant: string, passes: boolean): ProbeStep => ({ at, claimant, passes });
const claimant = (i: number) => `10.0.0.${i}`;

export const PROBE_CASES: ProbeCase[] = [
  {
    name: 'one claimant alone gets one pass per interval',
    steps: [step(0, 'A', true), step(0.4, 'A', false), step(0.8, 'A', false), step(1.2, 'A', true), step(1.6, 'A', false), step(2.4, 'A', true)],
  },
  {
    name: 'a flood from A and a newcomer B: B passes at the next free slot although A asks first and more often',
    steps: [
      step(0, 'A', true),
      step(0.2, 'A', false),
      step(0.4, 'A', false),
      step(0.5, 'B', false),
      step(0.6, 'A', false),
      step(0.8, 'A', false),
      // The slot is free, and B's: it never passed. A is refused, the slot kept for B.
      step(1.2, 'A', false),
      step(1.4, 'A', false),
      // B back after its Retry-After.
      step(1.5, 'B', true),
      step(1.6, 'A', false),
      step(2.0, 'A', false),
      step(2.2, 'A', false),
      // B passed and asks no more: the slot is A's again.
      step(2.7, 'A', true),
    ],
  },
  {
    name: 'A and B alternate under a sustained flood from both',
    steps: [...flood('A', 0, 6, 0.2), ...flood('B', 0.1, 6, 0.2)].sort((x, y) => x.at - y.at),
    passers: (passers) => {
      expect(passers.length, passers.join()).toBeGreaterThanOrEqual(5);
      expect(passers, passers.join()).toEqual(passers.map((_, i) => (i % 2 === 0 ? 'A' : 'B')));
    },
  },
  {
    name: 'a waiting claimant that stops retrying loses its turn after the wait memory',
    steps: [
      step(0, 'A', true),
      step(0.5, 'B', false),
      step(1.2, 'A', false),
      step(2.0, 'A', false),
      // B's refusal at 0.5 is still within the wait memory: the slot stays B's.
      step(0.5 + WAIT_MEMORY_INTERVALS - 0.3, 'A', false),
      step(0.5 + WAIT_MEMORY_INTERVALS + 0.2, 'A', true),
    ],
  },
  {
    name: 'the newest address has the free slot, except every third slot, which goes to the oldest waiting',
    steps: [
      step(0, 'A', true),
      step(0.5, 'O', false),
      step(0.9, 'F1', false),
      // F1 is new since the last pass, which the newest rule gave: once more the newest's.
      step(1.05, 'A', false),
      step(1.1, 'F1', true),
      step(1.5, 'O', false),
      step(2.0, 'F2', false),
      // Two passes in a row by the newest rule: this one is the oldest waiting's, not F2's.
      step(2.2, 'F2', false),
      step(2.3, 'O', true),
      step(3.0, 'F3', false),
      step(3.4, 'F3', true),
    ],
  },
  {
    name: 'a newcomer behind a flood from many addresses passes at the first free slot after it asked',
    steps: [
      ...Array.from({ length: 10 }, (_, i) => flood(claimant(i), i * 0.02, 6, 0.25)).flat(),
      ...[3.13, 4.13, 5.13].map((at) => ({ at, claimant: 'N' })),
    ].sort((x, y) => x.at - y.at),
    passers: (passers, passes) => {
      // Between N's first try and its pass, nobody passed: the first free slot was N's.
      const served = passes.findIndex(({ claimant: who }) => who === 'N');
      expect(served, passers.join()).toBeGreaterThan(0);
      expect(passes[served - 1]!.at, passers.join()).toBeLessThan(3.13);
      expect(passes.filter(({ claimant: who }) => who === 'N')).toHaveLength(1);
    },
  },
  {
    name: `past ${MAX_CLAIMANTS} claimants the least recently active is forgotten: back, it counts as new`,
    steps: [
      step(0, 'A', true),
      ...Array.from({ length: MAX_CLAIMANTS - 1 }, (_, i) => step(0.2 + i * 0.01, claimant(i + 1), false)),
      step(0.5, 'A', false),
      // Claimant 1, the least recently active, is forgotten for E.
      step(0.6, 'E', false),
      // Claimant 1 again: new, so the newest, although it first asked before the others and E.
      step(1.2, claimant(1), true),
    ],
  },
];

/**
 * Runs a case: `waitUntil` brings the clock to a step's time (in intervals), `ask` is the gate.
 * Resolves with the steps' answers; checks those pinned and the case's `passers`.
 */
export async function runProbeCase(
  testCase: ProbeCase,
  waitUntil: (at: number) => void | Promise<void>,
  ask: (claimant: string, index: number) => Promise<boolean>,
): Promise<void> {
  const passers: string[] = [];
  const passed: { claimant: string; at: number }[] = [];
  for (const [index, { at, claimant: who, passes }] of testCase.steps.entries()) {
    await waitUntil(at);
    const answer = await ask(who, index);
    if (passes !== undefined) expect(answer, `${who} at ${at}`).toEqual(passes);
    if (answer) {
      passers.push(who);
      passed.push({ claimant: who, at });
    }
  }
  testCase.passers?.(passers, passed);
}
