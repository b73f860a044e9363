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

  it('reset clears a subject', async () => {
    const limiter = new MemoryFailureLimiter({ limit: 1, windowMs: 60_000 });
    await limiter.recordFailure('a');
    expect(await limiter.blockedFor('a')).toBeGreaterThan(0);
    await limiter.reset('a');
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
