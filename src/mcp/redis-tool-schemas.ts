import type { Redis } from 'ioredis';
import type { SharedToolSchemas } from './tool-param-headers.ts';

/** How long the shared entries outlive the last list that refreshed them. */
const TTL_MS = 24 * 60 * 60_000;

/**
 * The tools' mirrored parameters, shared by replicas in one Redis hash (field: tool name), so
 * that a tool listed through one replica can be called with `Mcp-Param-*` through another.
 * Redis away: each replica keeps what it learnt itself, and a call it cannot check is refused
 * as before (never forwarded on a guess).
 */
export class RedisToolSchemas implements SharedToolSchemas {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #onError: (error: unknown) => void;

  constructor(options: { redis: Redis; prefix: string; onError?: (error: unknown) => void }) {
    this.#redis = options.redis;
    this.#key = `${options.prefix}mcp-tool-headers`;
    this.#onError = options.onError ?? (() => {});
  }

  publish(entries: ReadonlyArray<readonly [tool: string, value: string]>): void {
    this.#redis
      .multi()
      .hset(this.#key, Object.fromEntries(entries))
      .pexpire(this.#key, TTL_MS)
      .exec()
      .catch(this.#onError);
  }

  async fetch(tool: string): Promise<string | undefined> {
    try {
      return (await this.#redis.hget(this.#key, tool)) ?? undefined;
    } catch (error) {
      this.#onError(error);
      return undefined;
    }
  }
}
