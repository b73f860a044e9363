import { describe, expect, it } from 'vitest';
import { SlidingLog } from '../../../src/limits/sliding-log.ts';
import type { RateRule } from '../../../src/policy/rate-limits.ts';
import { densest } from '../../support/intervals.ts';

/** A seeded generator, so a failure reproduces. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/** Offers `count` requests at the given times; returns the times admitted. */
function offer(log: SlidingLog, rule: RateRule, times: readonly number[]): number[] {
  const admitted: number[] = [];
  for (const at of times) {
    if (!log.admits(1, rule, at)) continue;
    log.add(1, rule, at);
    admitted.push(at);
  }
  return admitted;
}

describe('SlidingLog: never more than the limit in any interval', () => {
  it.each([
    { rule: { requests: 10, perSeconds: 60 }, rate: 'a burst', times: Array.from({ length: 50 }, () => 0) },
    { rule: { requests: 10, perSeconds: 60 }, rate: 'one a second', times: Array.from({ length: 300 }, (_, i) => i * 1000) },
    { rule: { requests: 100, perSeconds: 1 }, rate: 'five a millisecond', times: Array.from({ length: 10_000 }, (_, i) => Math.floor(i / 5)) },
  ])('$rule.requests per $rule.perSeconds s, $rate', ({ rule, times }) => {
    const admitted = offer(new SlidingLog(), rule, times);
    // Closed intervals of the whole length, both ends included (times are whole milliseconds).
    expect(densest(admitted, rule.perSeconds * 1000 + 1)).toBeLessThanOrEqual(rule.requests);
  });

  it('at the edge of an interval, where a fixed window would admit twice the limit', () => {
    const rule = { requests: 10, perSeconds: 60 };
    const log = new SlidingLog();
    // Ten at the end of one minute, ten more asked at the start of the next.
    expect(offer(log, rule, Array.from({ length: 10 }, () => 59_999))).toHaveLength(10);
    expect(offer(log, rule, Array.from({ length: 10 }, () => 60_000))).toHaveLength(0);
    // A request counts for the whole interval of 60 s after it, its last instant included.
    expect(log.admits(1, rule, 59_999 + 60_000)).toBe(false);
    expect(log.admits(1, rule, 59_999 + 60_001)).toBe(true);
  });

  it.each([1, 2, 3, 4, 5])('random arrivals, seed %i: within the limit, and at least 64/65 of an exact log under overload', (seed) => {
    const next = random(seed);
    const rule = { requests: 1 + Math.floor(next() * 200), perSeconds: 1 + Math.floor(next() * 30) };
    const perMs = rule.perSeconds * 1000;
    // Three times the limit's rate, in bursts and lulls, over ten intervals.
    const times: number[] = [];
    let at = 0;
    while (at < perMs * 10) {
      at += next() < 0.1 ? next() * perMs * 0.5 : next() * (perMs / rule.requests / 1.5);
      times.push(Math.floor(at));
    }
    const admitted = offer(new SlidingLog(), rule, times);
    expect(densest(admitted, perMs + 1)).toBeLessThanOrEqual(rule.requests);
    // The reference: an exact log, one entry per request.
    const reference: number[] = [];
    for (const time of times) {
      const inWindow = reference.filter((t) => time - t <= perMs).length;
      if (inWindow < rule.requests) reference.push(time);
    }
    expect(admitted.length).toBeGreaterThanOrEqual(Math.floor((reference.length * 64) / 65) - rule.requests);
  });
});

describe('SlidingLog: what it tells', () => {
  const rule = { requests: 3, perSeconds: 10 };

  it('remaining and the reset: until the oldest counted request leaves the interval', () => {
    const log = new SlidingLog();
    expect(log.remaining(rule, 0)).toBe(3);
    expect(log.resetMs(rule, 0)).toBe(0);
    log.add(1, rule, 1_000);
    log.add(1, rule, 5_000);
    expect(log.remaining(rule, 5_000)).toBe(1);
    expect(log.resetMs(rule, 5_000)).toBe(6_000);
    expect(log.remaining(rule, 11_001)).toBe(2);
  });

  it('the retry: when enough requests have left the interval for the ones asked', () => {
    const log = new SlidingLog();
    for (const at of [0, 2_000, 4_000]) log.add(1, rule, at);
    expect(log.retryMs(1, rule, 5_000)).toBe(5_000);
    expect(log.retryMs(2, rule, 5_000)).toBe(7_000);
    expect(log.retryMs(1, rule, 10_001)).toBe(0);
  });

  it('a limit lowered below what is counted: refused for a whole interval from the newest', () => {
    const log = new SlidingLog();
    for (const at of [0, 1, 2]) log.add(1, rule, at);
    const lowered = { requests: 1, perSeconds: 10 };
    expect(log.admits(1, lowered, 3)).toBe(false);
    expect(log.retryMs(1, lowered, 3)).toBe(10_000 - 1);
  });

  it('groups requests close in time into one entry, stamped with the latest', () => {
    const log = new SlidingLog();
    const many = { requests: 1_000, perSeconds: 64 };
    // Groups of one second: ten requests within 900 ms stop counting together, 64 s after the last.
    for (let at = 0; at < 1_000; at += 100) log.add(1, many, at);
    expect(log.remaining(many, 64_900)).toBe(990);
    expect(log.remaining(many, 64_901)).toBe(1_000);
  });

  it('is idle once nothing counts under the last rule used', () => {
    const log = new SlidingLog();
    expect(log.idle(0)).toBe(true);
    log.add(1, rule, 0);
    expect(log.idle(10_000)).toBe(false);
    expect(log.idle(10_001)).toBe(true);
  });

  it('stays small: about one entry per 1/64 of the interval, whatever the traffic', () => {
    const log = new SlidingLog();
    const busy = { requests: 1_000_000, perSeconds: 1 };
    for (let at = 0; at < 100_000; at += 0.5) {
      if (log.admits(1, busy, at)) log.add(1, busy, at);
    }
    // What is left spans one interval: 2,000 requests, and at most one group more, in 65 entries at most.
    expect(log.size).toBeLessThanOrEqual(65);
    expect(busy.requests - log.remaining(busy, 100_000)).toBeGreaterThanOrEqual(2_000);
    expect(busy.requests - log.remaining(busy, 100_000)).toBeLessThanOrEqual(2_000 + 32);
  });
});
