import { describe, expect, it } from 'vitest';
import { ARGON2_BUSY, Argon2Hasher } from '../../../src/crypto/argon2.ts';

const CHEAP = { memoryKiB: 1024, timeCost: 1, parallelism: 1 };

/** One slot, so the order in which work finishes is the order in which it got the slot. */
async function setup(loginQueueLimit = 8) {
  const hasher = new Argon2Hasher({ ...CHEAP, concurrency: 1, loginQueueLimit });
  const encoded = await hasher.hash('secret');
  const finished: string[] = [];
  const track = <T>(name: string, work: Promise<T>) => work.then((value) => (finished.push(name), value));
  return { hasher, encoded, finished, track };
}

describe('Argon2Hasher: API-key work never waits behind queued logins', () => {
  it('serves a key verify queued after logins before those logins', async () => {
    const { hasher, encoded, finished, track } = await setup();
    const work = [
      track('login 1 (running)', hasher.verifyLogin(encoded, 'wrong')),
      track('login 2', hasher.verifyLogin(encoded, 'wrong')),
      track('login 3', hasher.verifyLogin(encoded, 'wrong')),
      track('key', hasher.verify(encoded, 'secret')),
      track('key hash', hasher.hash('another')),
    ];
    await Promise.all(work);
    expect(finished).toEqual(['login 1 (running)', 'key', 'key hash', 'login 2', 'login 3']);
    expect(await work[3]).toBe(true);
  });

  it('refuses login work at once when the login queue is full, and never refuses key work', async () => {
    const { hasher, encoded, track, finished } = await setup(2);
    const running = hasher.verifyLogin(encoded, 'secret');
    const queued = [hasher.verifyLogin(encoded, 'x'), hasher.hashLogin('x')];
    expect(hasher.loginLaneHasRoom()).toBe(false);
    expect(await hasher.verifyLogin(encoded, 'secret')).toBe(ARGON2_BUSY);
    expect(await hasher.hashLogin('secret')).toBe(ARGON2_BUSY);
    const keys = Array.from({ length: 5 }, (_, i) => track(`key ${i}`, hasher.verify(encoded, 'secret')));
    expect(await Promise.all(keys)).toEqual([true, true, true, true, true]);
    expect(await running).toBe(true);
    expect(await queued[0]).toBe(false);
    expect(finished).toHaveLength(5);
    expect(hasher.stats()).toEqual({ verifies: 7, loginVerifies: 2, loginRefusals: 3 });
    expect(hasher.loginLaneHasRoom()).toBe(true);
  });

  it('hashes login work with the parameters asked for', async () => {
    const { hasher } = await setup();
    const encoded = await hasher.hashLogin('pw', { memoryKiB: 2048, timeCost: 3, parallelism: 1 });
    expect(encoded).toMatch(/^\$argon2id\$v=19\$m=2048,t=3,p=1\$/);
    expect(await hasher.hashLogin('pw')).toMatch(/^\$argon2id\$v=19\$m=1024,t=1,p=1\$/);
  });
});
