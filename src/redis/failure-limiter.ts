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

/**
 * Reserve: when no subject (KEYS) is at the limit (ARGV[1]), count one failure for each, opening
 * a window (ARGV[2] ms) where none is open, and return 0; else count nothing and return the
 * milliseconds until the last blocking window closes. One script: the check and the count are
 * one step for every replica, so a burst spread over replicas cannot pass the check together.
 */
const RESERVE = `
local wait = 0
for _, key in ipairs(KEYS) do
  local failures = tonumber(redis.call('GET', key) or '0')
  if failures >= tonumber(ARGV[1]) then
    local left = redis.call('PTTL', key)
    if left < 0 then
      redis.call('PEXPIRE', key, ARGV[2])
      left = tonumber(ARGV[2])
    end
    if left > wait then wait = left end
  end
end
if wait > 0 then return wait end
for _, key in ipairs(KEYS) do
  local failures = redis.call('INCR', key)
  if failures == 1 or redis.call('PTTL', key) < 0 then
    redis.call('PEXPIRE', key, ARGV[2])
  end
end
return 0`;

/** Gives back one reserved failure; the window keeps its end. */
const RELEASE = `
local failures = tonumber(redis.call('GET', KEYS[1]) or '0')
if failures > 1 then redis.call('DECR', KEYS[1]) elseif failures == 1 then redis.call('DEL', KEYS[1]) end
return 0`;

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

  /**
   * Reserved here first (synchronously, so this replica's own burst is bounded even when Redis
   * is away), then in Redis. Redis refusing gives the local count back; Redis failing keeps it,
   * and the local count alone decides, as for `blockedFor`. A Redis silent for the command
   * timeout is down like one that is away (docs/replicas.md): the local count decides; the
   * script may still have counted the attempt in Redis, which only makes the shared count stricter.
   */
  async reserve(subjects: readonly string[]): Promise<number> {
    const local = this.#local.reserveSync(subjects);
    if (local > 0) return local;
    try {
      const keys = subjects.map((subject) => this.#key(subject));
      const leftMs = Number(await this.#redis.eval(RESERVE, keys.length, ...keys, this.#limit, this.#windowMs));
      if (leftMs > 0) {
        await Promise.all(subjects.map((subject) => this.#local.release(subject)));
        return Math.ceil(leftMs / 1000);
      }
    } catch (error) {
      this.#onError(error);
    }
    return 0;
  }

  async release(subject: string): Promise<void> {
    await this.#local.release(subject);
    try {
      await this.#redis.eval(RELEASE, 1, this.#key(subject));
    } catch (error) {
      this.#onError(error);
    }
  }

  #key(subject: string): string {
    return this.#keyPrefix + createHash('sha256').update(subject).digest('base64url');
  }
}
