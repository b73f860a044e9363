import { describe, expect, it } from 'vitest';
import type { IdentityTier } from '../../../src/verify/identity-tier.ts';
import { DEFAULT_SHARED_IDENTITY_TTL_MS, KeyVerifier } from '../../../src/verify/key-verifier.ts';
import { FrozenClock, KeyTable, tinyHasher } from './support.ts';

/** Redis stand-in: what the replicas share. */
class MapTier implements IdentityTier {
  readonly entries = new Map<string, { keyId: number; ttlMs: number }>();
  failing = false;
  get(digest: string): Promise<number | undefined> {
    if (this.failing) return Promise.reject(new Error('redis down'));
    return Promise.resolve(this.entries.get(digest)?.keyId);
  }
  set(digest: string, keyId: number, ttlMs: number): Promise<void> {
    if (this.failing) return Promise.reject(new Error('redis down'));
    this.entries.set(digest, { keyId, ttlMs });
    return Promise.resolve();
  }
}

async function setup(pepper = 'server-pepper') {
  const clock = new FrozenClock();
  const hasher = tinyHasher();
  const store = new KeyTable();
  const tier = new MapTier();
  const replica = (p = pepper) => new KeyVerifier({ store, hasher, now: clock.now, shared: { tier, pepper: p } });
  const { key, row } = await store.add(hasher);
  return { hasher, store, tier, replica, key, row };
}

describe('KeyVerifier: shared identity tier', () => {
  it('lets a second replica accept a key verified by the first without hashing, keyed by an HMAC digest', async () => {
    const { hasher, store, tier, replica, key, row } = await setup();
    await replica().verify(key);
    expect(hasher.verifyCount).toBe(1);
    expect(tier.entries.size).toBe(1);
    const [digest, entry] = [...tier.entries][0]!;
    expect(digest).not.toContain(key.slice(4));
    expect(digest).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(entry).toEqual({ keyId: row.id, ttlMs: DEFAULT_SHARED_IDENTITY_TTL_MS });

    const second = replica();
    expect((await second.verify(key)).keyId).toBe(row.id);
    expect(hasher.verifyCount).toBe(1);
    expect(store.byIdCalls).toBe(1);
    expect(second.stats()).toMatchObject({ sharedHits: 1, argon2Verifies: 0 });
    expect(second.tryVerifyCached(key)?.keyId).toBe(row.id);
  });

  it('finds nothing under another pepper', async () => {
    const { hasher, replica, key } = await setup();
    await replica().verify(key);
    await replica('another-pepper').verify(key);
    expect(hasher.verifyCount).toBe(2);
  });

  it('treats a failing tier as a miss and verifies with argon2id', async () => {
    const { hasher, tier, replica, key } = await setup();
    tier.failing = true;
    const verifier = replica();
    expect((await verifier.verify(key)).keyId).toBe(1);
    expect(hasher.verifyCount).toBe(1);
    expect(verifier.stats().sharedErrors).toBe(2);
  });
});
