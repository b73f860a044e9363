import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { RedisIdentityTier } from '../../src/redis/identity-tier.ts';
import { RedisSigner } from '../../src/redis/signer.ts';
import { KeyVerifier } from '../../src/verify/key-verifier.ts';
import { freePort } from '../support/gateway-process.ts';
import { until } from '../support/until.ts';
import { describeWithRedis, redisUrl } from '../support/services.ts';
import { KeyTable, tinyHasher } from '../unit/verify/support.ts';

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

describeWithRedis('RedisIdentityTier', () => {
  const prefix = `gh-test-${randomBytes(4).toString('hex')}:`;
  const signer = new RedisSigner(randomBytes(32));
  let redis: Redis;
  let tier: RedisIdentityTier;

  beforeAll(async () => {
    redis = createRedisConnection(redisUrl()!, { name: 'test:identity' });
    await ready(redis);
    tier = new RedisIdentityTier({ redis, signer, prefix });
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await closeRedisConnection(redis);
  });

  it('stores digest → key id with the TTL given, and reads it back', async () => {
    await tier.set('digest-a', 42, 60_000);
    expect(await tier.get('digest-a')).toBe(42);
    const ttl = await redis.pttl(`${prefix}identity:digest-a`);
    expect(ttl).toBeGreaterThan(55_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect(await tier.get('digest-unknown')).toBeUndefined();
  });

  it('forgets an entry when its TTL runs out', async () => {
    // Redis's clock runs the TTL: the test waits for Redis to drop the entry, then reads it as a miss.
    await tier.set('digest-short', 7, 50);
    await until(async () => (await redis.exists(`${prefix}identity:digest-short`)) === 0, 'the entry to expire');
    expect(await tier.get('digest-short')).toBeUndefined();
  });

  it('reads a value anyone could write to Redis as a miss: plain, under another secret, or moved from another digest', async () => {
    await redis.set(`${prefix}identity:plain`, '1');
    expect(await tier.get('plain')).toBeUndefined();

    const other = new RedisIdentityTier({ redis, signer: new RedisSigner(randomBytes(32)), prefix });
    await other.set('other-secret', 5, 60_000);
    expect(await tier.get('other-secret')).toBeUndefined();

    await tier.set('victim', 9, 60_000);
    await redis.set(`${prefix}identity:attacker`, (await redis.get(`${prefix}identity:victim`))!);
    expect(await tier.get('attacker')).toBeUndefined();
    expect(await tier.get('victim')).toBe(9);

    const signed = signer.sign('identity', 'NaN:tampered');
    await redis.set(`${prefix}identity:tampered`, signed);
    expect(await tier.get('tampered')).toBeUndefined();
  });

  it('lets a second replica accept a key without argon2id once the first has verified it', async () => {
    const hasher = tinyHasher();
    const store = new KeyTable();
    const { key, row } = await store.add(hasher);
    const pepper = randomBytes(32);
    const replica = () => new KeyVerifier({ store, hasher, shared: { tier, pepper } });
    const first = replica();
    const entriesBefore = (await redis.keys(`${prefix}identity:*`)).length;
    expect((await first.verify(key)).keyId).toBe(row.id);
    expect(hasher.verifyCount).toBe(1);
    // The shared write is not awaited by the request: wait for it to land.
    await until(async () => (await redis.keys(`${prefix}identity:*`)).length > entriesBefore, 'the shared write');

    const second = replica();
    expect((await second.verify(key)).keyId).toBe(row.id);
    expect(hasher.verifyCount).toBe(1);
    expect(second.stats()).toMatchObject({ sharedHits: 1, argon2Verifies: 0 });
    // The raw key is nowhere in Redis: only its HMAC.
    for (const name of await redis.keys(`${prefix}*`)) {
      expect(name).not.toContain(key);
      expect(await redis.get(name)).not.toContain(key);
    }
  });

  it('fails fast when Redis is unreachable, and the verifier treats that as a miss', async () => {
    const dead = createRedisConnection(`redis://127.0.0.1:${await freePort()}`, { name: 'test:dead' });
    try {
      const deadTier = new RedisIdentityTier({ redis: dead, signer, prefix });
      // Fails rather than queueing for a connection that will not come (a hang fails the test's timeout).
      await expect(deadTier.get('x')).rejects.toThrow();
      await expect(deadTier.set('x', 1, 1000)).rejects.toThrow();

      const hasher = tinyHasher();
      const store = new KeyTable();
      const { key, row } = await store.add(hasher);
      const verifier = new KeyVerifier({ store, hasher, shared: { tier: deadTier, pepper: 'pepper' } });
      expect((await verifier.verify(key)).keyId).toBe(row.id);
      expect(verifier.stats().sharedErrors).toBeGreaterThanOrEqual(1);
    } finally {
      dead.disconnect();
    }
  });
});
