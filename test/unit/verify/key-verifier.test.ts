import { describe, expect, it, vi } from 'vitest';
import { generateKey, KEY_PREFIX_LENGTH, keyPrefixOf } from '../../../src/credentials/key-format.ts';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { KeyVerifier, type KeyVerifierOptions } from '../../../src/verify/key-verifier.ts';
import { codeOf, forgedKey, FrozenClock, KeyTable, T0, tinyHasher } from './support.ts';

const TTL = 60_000;

function setup(options: Partial<KeyVerifierOptions> = {}) {
  const clock = new FrozenClock();
  const hasher = tinyHasher();
  const store = new KeyTable();
  const verifier = new KeyVerifier({
    store,
    hasher,
    now: clock.now,
    stateTtlMs: TTL,
    ...options,
  });
  return { clock, hasher, store, verifier };
}

/** Replaces one character of the random body, so the checksum no longer matches. */
function withBrokenChecksum(key: string): string {
  const at = KEY_PREFIX_LENGTH + 3;
  return key.slice(0, at) + (key[at] === 'A' ? 'B' : 'A') + key.slice(at + 1);
}

describe('KeyVerifier: malformed keys cost nothing', () => {
  const valid = generateKey();
  it.each([
    ['an empty string', ''],
    ['the tag alone', 'ghk_'],
    ['a broken checksum', withBrokenChecksum(valid)],
    ['one character too many', valid + 'A'],
    ['one character too few', valid.slice(0, -1)],
    ['another tag', 'ghx_' + valid.slice(4)],
    ['a character outside base62', valid.slice(0, 20) + '-' + valid.slice(21)],
    ['a JWT', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl'],
  ])('refuses %s with invalid_credential, no store read and no hash', async (_what, token) => {
    const { verifier, store, hasher } = setup();
    expect(verifier.tryVerifyCached(token)).toBeUndefined();
    expect(await codeOf(() => verifier.verify(token))).toBe('invalid_credential');
    expect(store.calls).toBe(0);
    expect(hasher.verifyCount).toBe(0);
  });
});

describe('KeyVerifier: cold and cached paths', () => {
  it('verifies a new key with one store read and one argon2id verify, then from memory alone', async () => {
    const { verifier, store, hasher } = setup();
    const { key, row } = await store.add(hasher, { agentId: 7, scopes: ['events:write', 'mcp:agents'] });

    expect(verifier.tryVerifyCached(key)).toBeUndefined();
    const principal = await verifier.verify(key);
    expect(principal).toEqual({ kind: 'api_key', keyId: row.id, agentId: 7, scopes: ['events:write', 'mcp:agents'], expiresAt: null, revoked: false, disabled: false, rateLimit: null });
    expect([store.byPrefixCalls, store.byIdCalls, hasher.verifyCount]).toEqual([1, 0, 1]);

    for (let i = 0; i < 3; i++) {
      expect(verifier.tryVerifyCached(key)).toBe(principal);
      expect(await verifier.verify(key)).toBe(principal);
    }
    expect([store.byPrefixCalls, store.byIdCalls, hasher.verifyCount]).toEqual([1, 0, 1]);
  });

  it('shares one argon2id verify between 100 concurrent first uses of one key', async () => {
    const { verifier, store, hasher } = setup();
    const { key, row } = await store.add(hasher);
    const principals = await Promise.all(Array.from({ length: 100 }, () => verifier.verify(key)));
    expect(hasher.verifyCount).toBe(1);
    expect(store.byPrefixCalls).toBe(1);
    expect(new Set(principals.map((p) => p.keyId))).toEqual(new Set([row.id]));
  });

  it('verifies concurrent first uses of different keys independently', async () => {
    const { verifier, store, hasher } = setup();
    const added = [];
    for (let i = 0; i < 5; i++) added.push(await store.add(hasher));
    const principals = await Promise.all(added.map(({ key }) => verifier.verify(key)));
    expect(principals.map((p) => p.keyId)).toEqual(added.map(({ row }) => row.id));
    expect(hasher.verifyCount).toBe(5);
  });

  it('shares a failed verify between concurrent uses and never caches it as a success', async () => {
    const { verifier, store, hasher } = setup();
    const { key } = await store.add(hasher);
    const impostor = forgedKey(keyPrefixOf(key));
    const codes = await Promise.all(Array.from({ length: 10 }, () => codeOf(() => verifier.verify(impostor))));
    expect(new Set(codes)).toEqual(new Set(['invalid_credential']));
    expect(hasher.verifyCount).toBe(1);
    expect(verifier.tryVerifyCached(impostor)).toBeUndefined();
    expect((await verifier.verify(key)).keyId).toBe(1);
  });

  it('re-reads the state by id after the state TTL, without hashing again', async () => {
    const { verifier, store, hasher, clock } = setup();
    const { key } = await store.add(hasher);
    await verifier.verify(key);
    clock.advance(TTL - 1);
    expect(verifier.tryVerifyCached(key)).toBeDefined();
    clock.advance(1);
    expect(verifier.tryVerifyCached(key)).toBeUndefined();
    await verifier.verify(key);
    expect([store.byPrefixCalls, store.byIdCalls, hasher.verifyCount]).toEqual([1, 1, 1]);
    expect(verifier.tryVerifyCached(key)).toBeDefined();
  });

  it('reads the state on every request when the state TTL is 0', async () => {
    const { verifier, store, hasher } = setup({ stateTtlMs: 0 });
    const { key } = await store.add(hasher);
    await verifier.verify(key);
    expect(verifier.tryVerifyCached(key)).toBeUndefined();
    await verifier.verify(key);
    await verifier.verify(key);
    expect([store.byPrefixCalls, store.byIdCalls, hasher.verifyCount]).toEqual([1, 2, 1]);
  });

  it('counts what each tier answered', async () => {
    const { verifier, store, hasher, clock } = setup();
    const { key } = await store.add(hasher);
    const authorize = async () => verifier.tryVerifyCached(key) ?? (await verifier.verify(key)); // as proxy/authorize.ts
    await authorize(); // identity miss; the state comes with the row hashed against
    await authorize(); // both hit
    clock.advance(TTL);
    await authorize(); // identity hit, state re-read
    await codeOf(() => verifier.verify(forgedKey(keyPrefixOf(key)))); // identity miss; its prefix's key is cached: no hash
    const other = await store.add(hasher);
    await codeOf(() => verifier.verify(forgedKey(keyPrefixOf(other.key)))); // identity miss, mismatch
    await codeOf(() => verifier.verify(withBrokenChecksum(key))); // malformed: counts nothing
    expect(verifier.stats()).toMatchObject({
      identityHits: 2,
      identityMisses: 3,
      stateHits: 1,
      stateMisses: 1,
      argon2Verifies: 2,
      argon2Mismatches: 1,
      provenPrefixRefusals: 1,
      throttled: 0,
    });
  });
});

describe('KeyVerifier: expiry is not its rule', () => {
  it('returns the principal of an expired key, with its expiry, for decide() to refuse', async () => {
    const { verifier, store, hasher, clock } = setup();
    const { key } = await store.add(hasher, { expiresAt: new Date(T0 + 1_000) });
    clock.advance(5_000);
    expect((await verifier.verify(key)).expiresAt).toEqual(new Date(T0 + 1_000));
    expect(verifier.tryVerifyCached(key)?.expiresAt).toEqual(new Date(T0 + 1_000));
    expect(store.calls).toBe(1);
  });
});

describe('KeyVerifier: revocation', () => {
  it('after evict, re-reads the state and refuses the revoked key without hashing again', async () => {
    const { verifier, store, hasher } = setup();
    const { key, row } = await store.add(hasher);
    await verifier.verify(key);
    store.rows.get(row.id)!.revokedAt = new Date(T0);
    // Still served from memory until told: this is why revocation must call evict.
    expect(verifier.tryVerifyCached(key)).toBeDefined();

    verifier.evict(row.id);
    expect(verifier.tryVerifyCached(key)).toBeUndefined();
    expect(await codeOf(() => verifier.verify(key))).toBe('revoked_credential');
    expect(await codeOf(() => verifier.tryVerifyCached(key))).toBe('revoked_credential');
    expect([store.byPrefixCalls, store.byIdCalls, hasher.verifyCount]).toEqual([1, 1, 1]);
  });

  it('does not cache a state read that was in flight when the key was evicted', async () => {
    const { verifier, store, hasher, clock } = setup();
    const { key, row } = await store.add(hasher);
    await verifier.verify(key);
    clock.advance(TTL);

    store.hold();
    const before = verifier.verify(key); // reads the row before the revocation
    expect(store.byIdCalls).toBe(1);
    store.rows.get(row.id)!.revokedAt = new Date(clock.ms);
    verifier.evict(row.id);
    const after = verifier.verify(key); // must not join the read from before
    store.release();

    expect((await before).keyId).toBe(row.id);
    expect(await codeOf(() => after)).toBe('revoked_credential');
    expect(await codeOf(() => verifier.tryVerifyCached(key))).toBe('revoked_credential');
  });

  it('refuses a key revoked while its first verify was in flight', async () => {
    const { verifier, store, hasher } = setup();
    const { key, row } = await store.add(hasher);
    store.hold();
    const first = verifier.verify(key);
    await vi.waitFor(() => expect(store.byPrefixCalls).toBe(1)); // the row is read, not yet answered
    store.rows.get(row.id)!.revokedAt = new Date(T0);
    verifier.evict(row.id);
    store.release();
    expect(await codeOf(() => first)).toBe('revoked_credential');
    expect(hasher.verifyCount).toBe(1);
  });

  it('evictAll drops every key state', async () => {
    const { verifier, store, hasher } = setup();
    const a = await store.add(hasher);
    const b = await store.add(hasher);
    await verifier.verify(a.key);
    await verifier.verify(b.key);
    verifier.evictAll();
    expect(verifier.tryVerifyCached(a.key)).toBeUndefined();
    expect(verifier.tryVerifyCached(b.key)).toBeUndefined();
  });
});

describe('KeyVerifier: wrong and unknown keys', () => {
  it.each([
    ['a wrong secret behind a real prefix', true, 1],
    ['an unknown prefix', false, 0],
  ])('refuses %s with invalid_credential', async (_what, realPrefix, hashes) => {
    const { verifier, store, hasher } = setup();
    const { key } = await store.add(hasher);
    const presented = realPrefix ? forgedKey(keyPrefixOf(key)) : generateKey();
    expect(await codeOf(() => verifier.verify(presented))).toBe('invalid_credential');
    expect(hasher.verifyCount).toBe(hashes);
  });
});

describe('KeyVerifier: store failures never allow', () => {
  it('answers store_unavailable, keeping the cause, for a key it must read', async () => {
    const { verifier, store, hasher } = setup();
    const { key } = await store.add(hasher);
    store.down = true;
    const error = await verifier.verify(key).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatewayError);
    expect((error as GatewayError).code).toBe('store_unavailable');
    expect((error as GatewayError).cause).toBeInstanceOf(Error);
    expect(hasher.verifyCount).toBe(0);

    store.down = false;
    expect((await verifier.verify(key)).keyId).toBe(1);
  });

  it('keeps serving a key with fresh cached state while the store is down, and refuses once it is stale', async () => {
    const { verifier, store, hasher, clock } = setup();
    const { key } = await store.add(hasher);
    await verifier.verify(key);
    store.down = true;
    expect(verifier.tryVerifyCached(key)?.keyId).toBe(1);
    expect((await verifier.verify(key)).keyId).toBe(1);
    clock.advance(TTL);
    expect(verifier.tryVerifyCached(key)).toBeUndefined();
    expect(await codeOf(() => verifier.verify(key))).toBe('store_unavailable');
  });
});

describe('KeyVerifier: options', () => {
  it.each([
    ['a cache size of 0', { cacheSize: 0 }],
    ['a fractional cache size', { cacheSize: 1.5 }],
    ['a negative state TTL', { stateTtlMs: -1 }],
    ['an infinite state TTL', { stateTtlMs: Infinity }],
  ])('refuses %s', (_what, options) => {
    expect(() => setup(options)).toThrow(RangeError);
  });

  it('holds at most cacheSize keys', async () => {
    const { verifier, store, hasher } = setup({ cacheSize: 2 });
    const keys = [];
    for (let i = 0; i < 3; i++) keys.push((await store.add(hasher)).key);
    for (const key of keys) await verifier.verify(key);
    expect(verifier.tryVerifyCached(keys[0]!)).toBeUndefined();
    expect(verifier.tryVerifyCached(keys[2]!)).toBeDefined();
  });
});
