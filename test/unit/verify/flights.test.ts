import { describe, expect, it } from 'vitest';
import { Flights } from '../../../src/verify/flights.ts';

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('Flights (singleflight)', () => {
  it('shares one piece of work between concurrent callers of a key, and not across keys', async () => {
    const flights = new Flights<string, number>();
    let started = 0;
    const work = (value: number) => () => {
      started++;
      return Promise.resolve(value);
    };
    const results = await Promise.all([flights.run('a', work(1)), flights.run('a', work(2)), flights.run('b', work(3))]);
    expect(results).toEqual([1, 1, 3]);
    expect(started).toBe(2);
    expect(flights.size).toBe(0);
  });

  it('forgets a failure once it settles, so the next caller tries again', async () => {
    const flights = new Flights<string, number>();
    await expect(flights.run('a', () => Promise.reject(new Error('no')))).rejects.toThrow('no');
    expect(await flights.run('a', () => Promise.resolve(2))).toBe(2);
  });

  it('after forget, starts a new flight for newcomers while earlier callers keep theirs', async () => {
    const flights = new Flights<string, string>();
    const first = deferred<string>();
    const early = flights.run('a', () => first.promise);
    flights.forget('a');
    const late = flights.run('a', () => Promise.resolve('new'));
    first.resolve('old');
    expect([await early, await late]).toEqual(['old', 'new']);
    // The old flight settling must not drop the newer one's slot.
    const second = deferred<string>();
    const third = flights.run('b', () => second.promise);
    flights.forget('b');
    const fourth = flights.run('b', () => new Promise<string>(() => {}));
    second.resolve('x');
    await third;
    expect(flights.size).toBe(1);
    expect(flights.run('b', () => Promise.resolve('y'))).toBe(fourth);
  });
});
