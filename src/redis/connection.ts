import { Redis, type Command, type RedisOptions } from 'ioredis';

/** A Redis that has not answered within this long is down (REDIS_COMMAND_TIMEOUT): a hung Redis must cost a request little. */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500;
export const DEFAULT_REDIS_CONNECT_TIMEOUT_MS = 2_000;
/** Reconnect backoff: quick at first (a restart), then every second at most, forever. */
export const REDIS_RECONNECT_STEP_MS = 50;
/**
 * ioredis's own `commandTimeout` and `socketTimeout` are set to this many times the timeout: a
 * backstop. The timeout itself is judged by `AnsweringRedis`, after pending replies are read.
 */
const IOREDIS_BACKSTOP_FACTOR = 4;
export const REDIS_RECONNECT_MAX_MS = 1_000;

export interface RedisConnectionOptions {
  /** Shown in `CLIENT LIST`, e.g. `gatehouse:commands`. */
  name: string;
  /** REDIS_COMMAND_TIMEOUT: a command unanswered this long fails, and the connection is dropped as dead. */
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
 *
 * A Redis that does not answer (stopped, hung, partitioned, slower than the timeout) is a Redis
 * that is down, for every use: a command still unanswered after the timeout drops the connection
 * (`AnsweringRedis`), so its status leaves `ready`, every pending command fails, and every later
 * one fails at once, without waiting, until a new connection passes ioredis's ready check (an
 * INFO, judged by the same timeout). That ready check is what marks Redis up again: a hung Redis
 * never looks up, however long its TCP connection stays open. ioredis's own `commandTimeout` and
 * `socketTimeout` stay as a backstop, at a multiple of the timeout.
 */
export function redisOptions(options: RedisConnectionOptions): RedisOptions {
  const backstopMs = (options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS) * IOREDIS_BACKSTOP_FACTOR;
  return {
    connectionName: options.name,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResubscribe: false,
    autoResendUnfulfilledCommands: false,
    commandTimeout: backstopMs,
    socketTimeout: backstopMs,
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
  const redis = new AnsweringRedis(url, redisOptions(options), options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS);
  watchStatus(redis, options.onStatus);
  // Without a listener an 'error' event would crash the process; the retry strategy reconnects.
  redis.on('error', (error: Error) => options.onError?.(error));
  // The first attempt's failure is reported through 'error' and retried like any other.
  redis.connect().catch(() => {});
  return redis;
}

/**
 * A connection that drops itself when a command is unanswered after `timeoutMs`, judged once the
 * replies already received have been read. A timer alone (ioredis's `commandTimeout`) fires in
 * the event loop's timers phase, before the poll phase reads the socket: when the loop is busy
 * longer than the timeout (the very burst a limiter is there for), replies sitting unread in the
 * socket would count as a Redis that did not answer, and each replica would then count alone.
 * The timer here looks again at the check phase (`setImmediate`), after the poll has read them.
 */
class AnsweringRedis extends Redis {
  readonly #timeoutMs: number;

  constructor(url: string, options: RedisOptions, timeoutMs: number) {
    super(url, { ...options, replyMapping: 'legacy' });
    this.#timeoutMs = timeoutMs;
  }

  override sendCommand(command: Command, stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    const sent = super.sendCommand(command, stream);
    if (command.isResolved) return sent;
    let answered = false;
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          // Unanswered on the connection it was sent on: that connection is dead to us.
          if (!answered && this.status !== 'end') this.disconnect(true);
        }),
      this.#timeoutMs,
    );
    timer.unref();
    const settle = () => {
      answered = true;
      clearTimeout(timer);
    };
    command.promise.then(settle, settle);
    return sent;
  }
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
