import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { MemoryProbeGate, type ProbeGate } from '../limits/probe-gate.ts';
import { DEFAULT_REDIS_PREFIX } from './identity-tier.ts';
import { isLateAnswer } from './late-answer.ts';

export interface RedisProbeGateOptions {
  redis: Redis;
  /** What is gated (`key_prefix`); part of the Redis key. */
  name: string;
  intervalMs: number;
  prefix?: string;
  /** Told of each Redis failure; this replica's own gate then decides alone. */
  onError?: (error: unknown) => void;
  now?: () => number;
}

/**
 * A ProbeGate shared by all replicas: `SET NX PX interval`, so one attempt per subject per
 * interval passes across the whole deployment. This replica's own gate is asked first, so
 * with Redis away each replica still lets at most one per interval through on its own.
 * Subjects are stored hashed.
 */
export class RedisProbeGate implements ProbeGate {
  readonly #redis: Redis;
  readonly #keyPrefix: string;
  readonly #intervalMs: number;
  readonly #local: MemoryProbeGate;
  readonly #onError: (error: unknown) => void;

  constructor(options: RedisProbeGateOptions) {
    if (!/^[a-z_]+$/.test(options.name)) throw new RangeError('RedisProbeGate: name must be lower-case letters');
    this.#redis = options.redis;
    this.#keyPrefix = `${options.prefix ?? DEFAULT_REDIS_PREFIX}probe:${options.name}:`;
    this.#intervalMs = options.intervalMs;
    this.#local = new MemoryProbeGate({ intervalMs: options.intervalMs, now: options.now });
    this.#onError = options.onError ?? (() => {});
  }

  async tryPass(subject: string): Promise<boolean> {
    if (!this.#local.tryPassSync(subject)) return false;
    try {
      const set = await this.#redis.set(this.#key(subject), '1', 'PX', this.#intervalMs, 'NX');
      if (set === 'OK') return true;
      // Another replica passed one this interval; ours did not pass, so it must not hold our next turn back.
      this.#local.forget(subject);
      return false;
    } catch (error) {
      this.#onError(error);
      // Away: this replica's own gate, already passed above, is the bound. Late: the interval may
      // be held in Redis (by another replica, or by this very command), so passing could double the rate.
      if (!isLateAnswer(error)) return true;
      this.#local.forget(subject);
      return false;
    }
  }

  #key(subject: string): string {
    return this.#keyPrefix + createHash('sha256').update(subject).digest('base64url');
  }
}
