import { describe, expect, it, vi } from 'vitest';
import { KeyVerifier } from '../../../src/verify/key-verifier.ts';
import { codeOf, FrozenClock, KeyTable, T0, tinyHasher } from './support.ts';

/** A long TTL: whatever is re-read below is re-read because the verifier is degraded, not because state went stale. */
const TTL = 60 * 60_000;

function setup() {
  const clock = new FrozenClock();
  const hasher = tinyHasher();
  const store = new KeyTable();
  const verifier = new KeyVerifier({ store, hasher, now: clock.now, stateTtlMs: TTL });
  return { clock, hasher, store, verifier };
}

describe('KeyVerifier: degraded (revocation channel lost)', () => {
  it('drops every cached state on entering, and reads the state on every request without hashing again', async () => {
    const { verifier, store, hasher } = setup();
    const { key, row } = await store.add(hasher);
    await verifier.verify(key);
    expect(verifier.tryVerifyCached(key)).toBeDefined();

    verifier.setDegraded(true);
    expect(verifier.degraded).toBe(true);
    expect(verifier.tryVerifyCached(key)).toBeUndefined();
    for (let i = 0; i < 3; i++) {
      expect((await verifier.verify(key)).keyId).toBe(row.id);
      expect(verifier.tryVerifyCached(key)).toBeUndefined();
    }
    expect([store.byPrefixCalls, store.byIdCalls, hasher.verifyCount]).toEqual([1, 3, 1]);
  });

  it('refuses a key revoked in the store at once, with no eviction ever announced', async () => {
    const { verifier, store, hasher } = setup();
    const { key, row } = await store.add(hasher);
    await verifier.verify(key);
    verifier.setDegraded(true);
    await verifier.verify(key);
    store.rows.get(row.id)!.revokedAt = new Date(T0);
    expect(await codeOf(() => verifier.verify(key))).toBe('revoked_credential');
  });

  it('does not let a request join a state read that began before a revocation', async () => {
    const { verifier, store, hasher } = setup();
    const { key, row } = await store.add(hasher);
    await verifier.verify(key);
    verifier.setDegraded(true);

    store.hold();
    const before = verifier.verify(key); // reads the row before the revocation
    expect(store.byIdCalls).toBe(1);
    store.rows.get(row.id)!.revokedAt = new Date(T0);
    const after = verifier.verify(key); // arrives after it: must read for itself
    expect(store.byIdCalls).toBe(2);
    store.release();
    expect((await before).keyId).toBe(row.id);
    expect(await codeOf(() => after)).toBe('revoked_credential');
  });

  it('does not trust the row of a first verify it joined: the state is read again', async () => {
    const { verifier, store, hasher } = setup();
    const { key, row } = await store.add(hasher);
    verifier.setDegraded(true);

    store.hold();
    const leader = verifier.verify(key);
    await vi.waitFor(() => expect(store.byPrefixCalls).toBe(1)); // the row is read, not yet answered
    store.rows.get(row.id)!.revokedAt = new Date(T0);
    const joined = verifier.verify(key);
    store.release();
    expect(await codeOf(() => joined)).toBe('revoked_credential');
    await leader.catch(() => {});
    expect(hasher.verifyCount).toBe(1);
  });

  it('on leaving, does not cache a read that began while degraded, then caches again', async () => {
    const { verifier, store, hasher } = setup();
    const { key } = await store.add(hasher);
    await verifier.verify(key);
    verifier.setDegraded(true);

    store.hold();
    const during = verifier.verify(key);
    expect(store.byIdCalls).toBe(1);
    verifier.setDegraded(false);
    expect(verifier.degraded).toBe(false);
    store.release();
    await during;
    expect(verifier.tryVerifyCached(key)).toBeUndefined();

    await verifier.verify(key);
    expect(verifier.tryVerifyCached(key)).toBeDefined();
    expect(store.byIdCalls).toBe(2);
  });

  it('keeps refusing with store_unavailable, never allowing, when degraded and the store is down', async () => {
    const { verifier, store, hasher } = setup();
    const { key } = await store.add(hasher);
    await verifier.verify(key);
    verifier.setDegraded(true);
    store.down = true;
    expect(await codeOf(() => verifier.verify(key))).toBe('store_unavailable');
  });

  it('holds fresh state (for readiness) only while a key is cached within its TTL and state is cached at all', async () => {
    const { verifier, store, hasher, clock } = setup();
    expect(verifier.holdsFreshState()).toBe(false);
    const { key } = await store.add(hasher);
    await verifier.verify(key);
    expect(verifier.holdsFreshState()).toBe(true);
    clock.advance(TTL);
    expect(verifier.holdsFreshState()).toBe(false);
    await verifier.verify(key);
    expect(verifier.holdsFreshState()).toBe(true);
    verifier.setDegraded(true);
    await verifier.verify(key);
    expect(verifier.holdsFreshState()).toBe(false);
    verifier.setDegraded(false);
    expect(verifier.holdsFreshState()).toBe(false);
  });
});
