import type { Redis } from 'ioredis';
import type { IdentityTier } from '../verify/identity-tier.ts';
import type { RedisSigner } from './signer.ts';

export const DEFAULT_REDIS_PREFIX = 'gatehouse:';
const PURPOSE = 'identity';

/**
 * The identity tier shared by replicas: HMAC digest of a presented key → key id, so a key
 * verified with argon2id on one replica is not verified again on another. The key id is
 * stored signed, bound to its digest: a value written by anyone but a replica (or moved
 * from another digest) reads as a miss, never as some other key.
 *
 * Errors propagate: the verifier counts them and treats them as misses.
 */
export class RedisIdentityTier implements IdentityTier {
  readonly #redis: Redis;
  readonly #signer: RedisSigner;
  readonly #prefix: string;

  constructor(options: { redis: Redis; signer: RedisSigner; prefix?: string }) {
    this.#redis = options.redis;
    this.#signer = options.signer;
    this.#prefix = `${options.prefix ?? DEFAULT_REDIS_PREFIX}identity:`;
  }

  async get(digest: string): Promise<number | undefined> {
    const value = await this.#redis.get(this.#prefix + digest);
    if (value === null) return undefined;
    const text = this.#signer.open(PURPOSE, value);
    if (text === undefined) return undefined;
    const separator = text.indexOf(':');
    if (separator < 0 || text.slice(separator + 1) !== digest) return undefined;
    const keyId = Number(text.slice(0, separator));
    return Number.isSafeInteger(keyId) && keyId > 0 ? keyId : undefined;
  }

  async set(digest: string, keyId: number, ttlMs: number): Promise<void> {
    const value = this.#signer.sign(PURPOSE, `${keyId}:${digest}`);
    await this.#redis.set(this.#prefix + digest, value, 'PX', Math.max(1, Math.round(ttlMs)));
  }
}
