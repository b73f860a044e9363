import { afterEach, describe, expect, it, vi } from 'vitest';
import { UpstreamDeadlines, type AwaitingHeaders } from '../../../src/proxy/upstream-deadlines.ts';

function waiting(name: string, expired: string[], onExpire?: (entry: AwaitingHeaders) => void): AwaitingHeaders {
  const entry: AwaitingHeaders = {
    since: 0,
    previous: undefined,
    next: undefined,
    linked: false,
    expire: () => {
      expired.push(name);
      onExpire?.(entry);
    },
  };
  return entry;
}

describe('UpstreamDeadlines', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('expires each wait at the bound (within one sweep), in order; stopped ones never; the sweep stops when none is left', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    const deadlines = new UpstreamDeadlines(1_000);
    const expired: string[] = [];
    const [a, b, c] = ['a', 'b', 'c'].map((name) => waiting(name, expired));
    deadlines.start(a!, performance.now());
    vi.advanceTimersByTime(300);
    deadlines.start(b!, performance.now());
    deadlines.start(c!, performance.now());
    deadlines.stop(b!);
    deadlines.stop(b!);
    vi.advanceTimersByTime(699);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(50);
    expect(expired).toEqual(['a']);
    vi.advanceTimersByTime(300);
    expect(expired).toEqual(['a', 'c']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a wait touched when it expires (a body still being sent) counts again from then', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    const deadlines = new UpstreamDeadlines(1_000);
    const expired: string[] = [];
    let touches = 1;
    const a = waiting('a', expired, (entry) => {
      if (touches-- > 0) deadlines.touch(entry);
    });
    deadlines.start(a, performance.now());
    vi.advanceTimersByTime(1_050);
    expect(expired).toEqual(['a']);
    vi.advanceTimersByTime(1_000);
    expect(expired).toEqual(['a', 'a']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('close stops the sweep', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    const deadlines = new UpstreamDeadlines(1_000);
    deadlines.start(waiting('a', []), performance.now());
    expect(vi.getTimerCount()).toBe(1);
    deadlines.close();
    expect(vi.getTimerCount()).toBe(0);
  });
});
