import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { MemoryFailureLimiter, type FailureLimiter } from '../limits/failure-limiter.ts';
import { DEFAULT_REDIS_PREFIX } from './identity-tier.ts';

/** INCR and open the window on the first failure, in one step: two replicas cannot both open it. */
const RECORD_FAILURE = `
local failures = redis.call('INCR', KEYS[1])
if failures == 1 or redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return failures`;

/** Milliseconds until the window closes when the subject is at or past the limit, else 0. */
const BLOCKED_FOR = `
local failures = tonumber(redis.call('GET', KEYS[1]) or '0')
if failures < tonumber(ARGV[1]) then return 0 end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then return 0 end
return left`;

export interface RedisFailureLimiterOptions {
  redis: Redis;
  /** What is limited (`login`, `key_prefix`); part of the Redis key. */
  name: string;
  limit: number;
  windowMs: number;
  prefix?: string;
  /** Told of each Redis failure; the decision is then taken from this replica's own counts. */
  onError?: (error: unknown) => void;
  now?: () => number;
}

/**
 * A FailureLimiter shared by all replicas through Redis (same fixed window as
 * MemoryFailureLimiter). Every failure is also counted in memory, and a subject is blocked
 * when either count says so: when Redis cannot answer, the replica still limits with what it
 * saw itself, so an outage never lifts a block this replica knows of and never opens the door
 * to unlimited guessing. At worst, during an outage, each replica allows `limit` on its own.
 *
 * Subjects (emails, addresses, key prefixes) are stored hashed: Redis holds no addresses.
 */
export class RedisFailureLimiter implements FailureLimiter {
  readonly #redis: Redis;
  readonly #keyPrefix: string;
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #local: MemoryFailureLimiter;
  readonly #onError: (error: unknown) => void;

  constructor(options: RedisFailureLimiterOptions) {
    if (!/^[a-z_]+$/.test(options.name)) throw new RangeError('RedisFailureLimiter: name must be lower-case letters');
    this.#redis = options.redis;
    this.#keyPrefix = `${options.prefix ?? DEFAULT_REDIS_PREFIX}limit:${options.name}:`;
    this.#limit = options.limit;
    this.#windowMs = options.windowMs;
    this.#local = new MemoryFailureLimiter({ limit: options.limit, windowMs: options.windowMs, now: options.now });
    this.#onError = options.onError ?? (() => {});
  }

  async blockedFor(subject: string): Promise<number> {
    const local = this.#local.blockedForSync(subject);
    let shared = 0;
    try {
      const leftMs = Number(await this.#redis.eval(BLOCKED_FOR, 1, this.#key(subject), this.#limit));
      shared = leftMs > 0 ? Math.ceil(leftMs / 1000) : 0;
    } catch (error) {
      this.#onError(error);
    }
    return Math.max(local, shared);
  }

  async recordFailure(subject: string): Promise<void> {
    await this.#local.recordFailure(subject);
    try {
      await this.#redis.eval(RECORD_FAILURE, 1, this.#key(subject), this.#windowMs);
    } catch (error) {
      this.#onError(error);
    }
  }

  async reset(subject: string): Promise<void> {
    await this.#local.reset(subject);
    try {
      await this.#redis.del(this.#key(subject));
    } catch (error) {
      this.#onError(error);
    }
  }

  #key(subject: string): string {
    return this.#keyPrefix + createHash('sha256').update(subject).digest('base64url');
  }
}
