import { describe, expect, it } from 'vitest';
import { keyPrefixOf } from '../../../src/credentials/key-format.ts';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { MemoryFailureLimiter } from '../../../src/limits/failure-limiter.ts';
import {
  KEY_PREFIX_FAILURE_LIMIT,
  KEY_PREFIX_FAILURE_WINDOW_MS,
  KEY_PREFIX_PROBE_INTERVAL_MS,
  KeyVerifier,
  REJECTED_KEY_TTL_MS,
} from '../../../src/verify/key-verifier.ts';
import { codeOf, forgedKey, FrozenClock, KeyTable, tinyHasher } from './support.ts';

const LIMIT = 3;
const WINDOW_MS = 60_000;

/** Guessing secrets behind a real prefix must not buy argon2 work, nor lock the real key out. */
async function setup() {
  const clock = new FrozenClock();
  const hasher = tinyHasher();
  const store = new KeyTable();
  const limiter = new MemoryFailureLimiter({ limit: LIMIT, windowMs: WINDOW_MS, now: clock.now });
  const replica = () => new KeyVerifier({ store, hasher, limiter, now: clock.now });
  const verifier = replica();
  const { key, row } = await store.add(hasher);
  return { clock, hasher, store, limiter, verifier, replica, key, row, prefix: keyPrefixOf(key) };
}

describe('KeyVerifier: failed verifies are throttled per key prefix', () => {
  it('after the limit, refuses new keys of the prefix with rate_limited and no work, and keeps serving the cached key', async () => {
    const { verifier, hasher, store, key, row, prefix } = await setup();
    await verifier.verify(key);
    for (let i = 0; i < LIMIT; i++) expect(await codeOf(() => verifier.verify(forgedKey(prefix)))).toBe('invalid_credential');
    const [hashes, reads] = [hasher.verifyCount, store.calls];

    const error = await verifier.verify(forgedKey(prefix)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatewayError);
    expect((error as GatewayError).code).toBe('rate_limited');
    expect((error as GatewayError).retryAfter).toBe(WINDOW_MS / 1000);
    expect([hasher.verifyCount, store.calls]).toEqual([hashes, reads]);

    expect(verifier.tryVerifyCached(key)?.keyId).toBe(row.id);
    expect((await verifier.verify(key)).keyId).toBe(row.id);
    expect(verifier.stats().throttled).toBe(1);
  });

  it('never locks the real key out: where it is not cached, it gets in at the next probe interval', async () => {
    const { verifier, replica, hasher, clock, key, prefix } = await setup();
    for (let i = 0; i < LIMIT; i++) await codeOf(() => verifier.verify(forgedKey(prefix)));
    // Past the limit, this second's one verify of the prefix goes to a guess...
    expect(await codeOf(() => verifier.verify(forgedKey(prefix)))).toBe('invalid_credential');
    expect(await codeOf(() => verifier.verify(forgedKey(prefix)))).toBe('rate_limited');
    expect(hasher.verifyCount).toBe(LIMIT + 1);
    // ...and the next second's to the real key, on a replica that never saw it (the gate is per process here).
    const fresh = replica();
    clock.advance(KEY_PREFIX_PROBE_INTERVAL_MS);
    expect((await fresh.verify(key)).keyId).toBe(1);
    expect(hasher.verifyCount).toBe(LIMIT + 2);
  });

  it('once throttled, verifies at most one key of the prefix per probe interval', async () => {
    const { verifier, hasher, clock, prefix } = await setup();
    for (let i = 0; i < LIMIT; i++) await codeOf(() => verifier.verify(forgedKey(prefix)));
    const seconds = 5;
    const codes: string[] = [];
    for (let tick = 0; tick < seconds * 10; tick++) {
      codes.push(...(await Promise.all(Array.from({ length: 5 }, () => codeOf(() => verifier.verify(forgedKey(prefix)))))));
      clock.advance(KEY_PREFIX_PROBE_INTERVAL_MS / 10);
    }
    expect(hasher.verifyCount - LIMIT).toBe(seconds);
    expect(codes.filter((code) => code === 'invalid_credential')).toHaveLength(seconds);
    expect(codes.filter((code) => code === 'rate_limited')).toHaveLength(codes.length - seconds);
    expect(verifier.stats().probes).toBe(seconds);
  });

  it('under a flood from one address, the real key from another gets the next interval although the flood asks first', async () => {
    const { verifier, clock, key, row, prefix } = await setup();
    for (let i = 0; i < LIMIT; i++) await codeOf(() => verifier.verify(forgedKey(prefix), '192.0.2.1'));
    const flood = () => codeOf(() => verifier.verify(forgedKey(prefix), '192.0.2.1'));
    expect([await flood(), await flood()]).toEqual(['invalid_credential', 'rate_limited']);
    expect(await codeOf(() => verifier.verify(key, '198.51.100.7'))).toBe('rate_limited');
    clock.advance(KEY_PREFIX_PROBE_INTERVAL_MS);
    expect([await flood(), await flood()]).toEqual(['rate_limited', 'rate_limited']);
    expect((await verifier.verify(key, '198.51.100.7')).keyId).toBe(row.id);
  });

  it('leaves other prefixes alone', async () => {
    const { verifier, store, hasher, prefix } = await setup();
    const other = await store.add(hasher);
    for (let i = 0; i < LIMIT; i++) await codeOf(() => verifier.verify(forgedKey(prefix)));
    expect((await verifier.verify(other.key)).keyId).toBe(other.row.id);
  });

  it('verifies one uncached key of a prefix at a time, refusing concurrent guesses', async () => {
    const { verifier, hasher, prefix } = await setup();
    const codes = await Promise.all(Array.from({ length: 10 }, () => codeOf(() => verifier.verify(forgedKey(prefix)))));
    expect(codes.filter((code) => code === 'invalid_credential')).toHaveLength(1);
    expect(codes.filter((code) => code === 'rate_limited')).toHaveLength(9);
    expect(hasher.verifyCount).toBe(1);
  });

  it('by default allows KEY_PREFIX_FAILURE_LIMIT failures per window', async () => {
    const clock = new FrozenClock();
    const hasher = tinyHasher();
    const store = new KeyTable();
    const { key } = await store.add(hasher);
    const verifier = new KeyVerifier({ store, hasher, now: clock.now });
    const prefix = keyPrefixOf(key);
    for (let i = 0; i < KEY_PREFIX_FAILURE_LIMIT; i++) expect(await codeOf(() => verifier.verify(forgedKey(prefix)))).toBe('invalid_credential');
    // The probe interval's one verify, then refusals.
    expect(await codeOf(() => verifier.verify(forgedKey(prefix)))).toBe('invalid_credential');
    expect(await codeOf(() => verifier.verify(forgedKey(prefix)))).toBe('rate_limited');
    clock.advance(KEY_PREFIX_FAILURE_WINDOW_MS);
    expect(await codeOf(() => verifier.verify(forgedKey(prefix)))).toBe('invalid_credential');
  });
});

describe('KeyVerifier: an exact wrong key is remembered briefly', () => {
  it.each([
    ['a wrong secret behind a real prefix', true, { hashes: 1, reads: 1 }],
    ['an unknown prefix', false, { hashes: 0, reads: 1 }],
  ])('refuses %s again from memory, then checks it again after REJECTED_KEY_TTL_MS', async (_what, realPrefix, once) => {
    const { verifier, hasher, store, clock, prefix } = await setup();
    const wrong = forgedKey(realPrefix ? prefix : 'ghk_00000000');
    const reads = store.calls;
    for (let i = 0; i < 5; i++) expect(await codeOf(() => verifier.verify(wrong))).toBe('invalid_credential');
    expect({ hashes: hasher.verifyCount, reads: store.calls - reads }).toEqual(once);
    expect(verifier.stats().rejectedHits).toBe(4);

    clock.advance(REJECTED_KEY_TTL_MS - 1);
    await codeOf(() => verifier.verify(wrong));
    expect(hasher.verifyCount).toBe(once.hashes);
    clock.advance(1);
    await codeOf(() => verifier.verify(wrong));
    expect({ hashes: hasher.verifyCount, reads: store.calls - reads }).toEqual({ hashes: once.hashes * 2, reads: 2 });
  });

  it('does not count a repeat as another failure of the prefix', async () => {
    const { verifier, key, prefix } = await setup();
    const wrong = forgedKey(prefix);
    for (let i = 0; i < LIMIT * 3; i++) await codeOf(() => verifier.verify(wrong));
    expect((await verifier.verify(key)).keyId).toBe(1);
  });

  it('refuses a guess behind the prefix of a cached key with no store read and no hash, still counted by the throttle', async () => {
    const { verifier, hasher, store, key, row, prefix } = await setup();
    await verifier.verify(key);
    const [hashes, reads] = [hasher.verifyCount, store.calls];
    for (let i = 0; i < LIMIT; i++) expect(await codeOf(() => verifier.verify(forgedKey(prefix)))).toBe('invalid_credential');
    expect([hasher.verifyCount, store.calls]).toEqual([hashes, reads]);
    expect(verifier.stats().provenPrefixRefusals).toBe(LIMIT);
    // The throttle sees the same failures as when each guess was hashed: the next one is rate_limited.
    expect(await codeOf(() => verifier.verify(forgedKey(prefix)))).toBe('rate_limited');
    expect(verifier.tryVerifyCached(key)?.keyId).toBe(row.id);
  });

  it('hashes a guess again once the real key has left the identity cache (the proof goes with it)', async () => {
    const clock = new FrozenClock();
    const hasher = tinyHasher();
    const store = new KeyTable();
    const verifier = new KeyVerifier({ store, hasher, cacheSize: 1, now: clock.now });
    const first = await store.add(hasher);
    const second = await store.add(hasher);
    await verifier.verify(first.key);
    await verifier.verify(second.key); // evicts first.key from the one-entry identity cache
    const hashes = hasher.verifyCount;
    expect(await codeOf(() => verifier.verify(forgedKey(keyPrefixOf(first.key))))).toBe('invalid_credential');
    expect(hasher.verifyCount).toBe(hashes + 1);
    expect(await codeOf(() => verifier.verify(forgedKey(keyPrefixOf(second.key))))).toBe('invalid_credential');
    expect(hasher.verifyCount).toBe(hashes + 1);
    expect(verifier.stats().provenPrefixRefusals).toBe(1);
  });
});
