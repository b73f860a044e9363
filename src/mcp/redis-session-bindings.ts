import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { GatewayError } from '../errors/gateway-error.ts';
import { DEFAULT_SESSION_BINDING_TTL_MS, MemorySessionBindings, type BindingCheck, type SessionBindings } from './session-bindings.ts';

/** GET, and extend the binding when it is the caller's: 0 unknown, 1 bound, 2 another key's. */
const CHECK = `
local owner = redis.call('GET', KEYS[1])
if not owner then return 0 end
if owner ~= ARGV[1] then return 2 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

/** SET NX, or extend it when it already names the same key: 1 bound, 0 another key's. */
const BIND = `
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0`;

export interface RedisSessionBindingsOptions {
  redis: Redis;
  /** The deployment's namespace (`RedisTier`'s prefix), ending in `:`. */
  prefix: string;
  ttlMs?: number;
  /** Told of each Redis failure that was absorbed (the binding is then kept in this replica only). */
  onError?: (error: unknown) => void;
  now?: () => number;
}

/**
 * Session bindings shared by replicas through Redis: a session opened through one replica
 * may be continued through another, by the same key only. Each binding is mirrored in this
 * replica's memory, so its own sessions keep working while Redis is away; a session this
 * replica has not seen is refused with 503 while Redis cannot be asked (never allowed on a
 * guess). Session ids are stored hashed: Redis never holds one a client could present.
 */
export class RedisSessionBindings implements SessionBindings {
  readonly #redis: Redis;
  readonly #keyPrefix: string;
  readonly #ttlMs: number;
  readonly #local: MemorySessionBindings;
  readonly #onError: (error: unknown) => void;

  constructor(options: RedisSessionBindingsOptions) {
    this.#redis = options.redis;
    this.#keyPrefix = `${options.prefix}mcp-session:`;
    this.#ttlMs = Math.max(1, Math.round(options.ttlMs ?? DEFAULT_SESSION_BINDING_TTL_MS));
    this.#local = new MemorySessionBindings({ ttlMs: this.#ttlMs, now: options.now });
    this.#onError = options.onError ?? (() => {});
  }

  async bind(sessionId: string, keyId: number): Promise<boolean> {
    if (!this.#local.bindSync(sessionId, keyId)) return false;
    try {
      if (Number(await this.#redis.eval(BIND, 1, this.#key(sessionId), String(keyId), this.#ttlMs)) === 1) return true;
    } catch (error) {
      this.#onError(error);
      return true;
    }
    await this.#local.unbind(sessionId);
    return false;
  }

  async check(sessionId: string, keyId: number): Promise<BindingCheck> {
    const local = this.#local.checkSync(sessionId, keyId);
    if (local === 'other_key') return local;
    if (local === 'bound') {
      // Known here: answer at once, and extend the shared binding for the other replicas in the background.
      this.#redis.pexpire(this.#key(sessionId), this.#ttlMs).catch(this.#onError);
      return local;
    }
    let answer: number;
    try {
      answer = Number(await this.#redis.eval(CHECK, 1, this.#key(sessionId), String(keyId), this.#ttlMs));
    } catch (error) {
      throw new GatewayError('store_unavailable', 'MCP session bindings cannot be read right now; retry later', { cause: error });
    }
    if (answer === 2) return 'other_key';
    if (answer !== 1) return 'unknown';
    this.#local.bindSync(sessionId, keyId);
    return 'bound';
  }

  async unbind(sessionId: string): Promise<void> {
    await this.#local.unbind(sessionId);
    try {
      await this.#redis.del(this.#key(sessionId));
    } catch (error) {
      this.#onError(error);
    }
  }

  #key(sessionId: string): string {
    return this.#keyPrefix + createHash('sha256').update(sessionId).digest('base64url');
  }
}
