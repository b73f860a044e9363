import { Redis, type RedisOptions } from 'ioredis';

/** A command that has no answer within this long fails: a dead Redis must cost a request little. */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500;
export const DEFAULT_REDIS_CONNECT_TIMEOUT_MS = 2_000;
/** Reconnect backoff: quick at first (a restart), then every second at most, forever. */
export const REDIS_RECONNECT_STEP_MS = 50;
export const REDIS_RECONNECT_MAX_MS = 1_000;

export interface RedisConnectionOptions {
  /** Shown in `CLIENT LIST`, e.g. `gatehouse:commands`. */
  name: string;
  commandTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Told `true` when the connection is ready for commands, `false` when it is lost; only on changes. */
  onStatus?: (up: boolean) => void;
  /** Connection errors (refused, reset, timed out), for a rate-limited log; they are retried regardless. */
  onError?: (error: Error) => void;
}

/**
 * Options shared by every Gatehouse connection. Redis is a cache and a bus here, never the
 * source of truth, so a command must fail fast instead of waiting for a Redis that is away:
 * no offline queue (a command sent while disconnected fails at once), no retries of a command
 * on reconnect (a PUBLISH or INCR must not happen twice, late), a bounded command time, and
 * reconnection forever in the background. Subscriptions are not restored by ioredis: the
 * revocation bus resubscribes itself, so it knows the moment it is subscribed again.
 */
export function redisOptions(options: RedisConnectionOptions): RedisOptions {
  return {
    connectionName: options.name,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResubscribe: false,
    autoResendUnfulfilledCommands: false,
    commandTimeout: options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: options.connectTimeoutMs ?? DEFAULT_REDIS_CONNECT_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(attempt * REDIS_RECONNECT_STEP_MS, REDIS_RECONNECT_MAX_MS),
  };
}

/**
 * Opens a connection to `url` without waiting for it: Gatehouse starts and serves with Redis
 * down (every guarantee then rests on the store), and the connection comes up when Redis does.
 * The URL (it may hold a password) never appears in what is reported.
 */
export function createRedisConnection(url: string, options: RedisConnectionOptions): Redis {
  const redis = new Redis(url, redisOptions(options));
  watchStatus(redis, options.onStatus);
  // Without a listener an 'error' event would crash the process; the retry strategy reconnects.
  redis.on('error', (error: Error) => options.onError?.(error));
  // The first attempt's failure is reported through 'error' and retried like any other.
  redis.connect().catch(() => {});
  return redis;
}

/** Reports `up` on 'ready' and `down` when the connection is lost, once per change. */
export function watchStatus(redis: Redis, onStatus: ((up: boolean) => void) | undefined): void {
  if (onStatus === undefined) return;
  let up: boolean | undefined;
  const report = (next: boolean) => {
    if (next === up) return;
    up = next;
    onStatus(next);
  };
  redis.on('ready', () => report(true));
  redis.on('close', () => report(false));
  redis.on('end', () => report(false));
}

/** Closes a connection without waiting for a Redis that may be gone. */
export async function closeRedisConnection(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  await Promise.race([
    redis.quit().catch(() => {}),
    new Promise((resolve) => setTimeout(resolve, DEFAULT_REDIS_COMMAND_TIMEOUT_MS).unref()),
  ]);
  redis.disconnect();
}
