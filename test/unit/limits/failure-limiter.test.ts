import { describe, expect, it } from 'vitest';
import { MemoryFailureLimiter } from '../../../src/limits/failure-limiter.ts';

describe('failure limiter (frozen clock)', () => {
  it('blocks after the limit until the window closes, then forgets', async () => {
    let now = 1_000_000;
    const limiter = new MemoryFailureLimiter({ limit: 3, windowMs: 60_000, now: () => now });
    for (let i = 0; i < 3; i++) {
      expect(await limiter.blockedFor('a')).toBe(0);
      await limiter.recordFailure('a');
    }
    expect(await limiter.blockedFor('a')).toBe(60);
    expect(await limiter.blockedFor('b')).toBe(0);
    now += 59_000;
    expect(await limiter.blockedFor('a')).toBe(1);
    now += 1_000;
    expect(await limiter.blockedFor('a')).toBe(0);
    await limiter.recordFailure('a');
    expect(await limiter.blockedFor('a')).toBe(0);
  });

  it('tracks at most maxSubjects, forgetting the least recently touched first', async () => {
    const limiter = new MemoryFailureLimiter({ limit: 1, windowMs: 60_000, maxSubjects: 3 });
    for (const subject of ['a', 'b', 'c']) await limiter.recordFailure(subject);
    expect(await limiter.blockedFor('a')).toBeGreaterThan(0);
    await limiter.recordFailure('d');
    // 'a' was touched last by blockedFor, so 'b' is the one forgotten.
    expect(await limiter.blockedFor('b')).toBe(0);
    for (const subject of ['a', 'c', 'd']) expect(await limiter.blockedFor(subject)).toBeGreaterThan(0);
  });
});

describe('MemoryFailureLimiter: reserving attempts before they are checked', () => {
  it('lets at most `limit` of a simultaneous burst through, counting each one before any is checked', async () => {
    const limiter = new MemoryFailureLimiter({ limit: 10, windowMs: 60_000, now: () => 0 });
    const waits = await Promise.all(Array.from({ length: 1000 }, () => limiter.reserve(['email:a', 'addr:1'])));
    expect(waits.filter((wait) => wait === 0)).toHaveLength(10);
    expect(waits.filter((wait) => wait === 60)).toHaveLength(990);
  });

  it('counts nothing for any subject when one of them is at the limit', async () => {
    const limiter = new MemoryFailureLimiter({ limit: 2, windowMs: 60_000, now: () => 0 });
    await limiter.reserve(['email:a', 'addr:1']);
    await limiter.reserve(['email:a', 'addr:1']);
    expect(await limiter.reserve(['email:a', 'addr:2'])).toBe(60);
    // addr:2 was not charged for the refused attempt.
    expect(await limiter.reserve(['email:b', 'addr:2'])).toBe(0);
    expect(await limiter.reserve(['email:c', 'addr:2'])).toBe(0);
    expect(await limiter.reserve(['email:d', 'addr:2'])).toBe(60);
  });

  it('gives a released reservation back, without moving the window', async () => {
    let now = 0;
    const limiter = new MemoryFailureLimiter({ limit: 1, windowMs: 60_000, now: () => now });
    expect(await limiter.reserve(['s'])).toBe(0);
    expect(await limiter.reserve(['s'])).toBe(60);
    await limiter.release('s');
    expect(await limiter.reserve(['s'])).toBe(0);
    now = 30_000;
    expect(await limiter.reserve(['s'])).toBe(30);
    await limiter.release('s');
    await limiter.release('s'); // never below zero
    expect(await limiter.reserve(['s'])).toBe(0);
    expect(await limiter.reserve(['s'])).toBeGreaterThan(0);
  });
});
