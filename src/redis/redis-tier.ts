import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Store } from '../store/store.ts';
import { closeRedisConnection, createRedisConnection } from './connection.ts';
import { RedisFailureLimiter } from './failure-limiter.ts';
import { DEFAULT_REDIS_PREFIX, RedisIdentityTier } from './identity-tier.ts';
import { RevocationBus, type RevocationBusEvent } from './revocation-bus.ts';
import { SharedRateLimiter, type RateLimitObserver } from './shared-rate-limiter.ts';
import { RedisSigner } from './signer.ts';

/** Settings in the store, so every replica on one database holds the same secrets without configuration. */
export const IDENTITY_PEPPER_SETTING = 'identity_pepper';
export const REDIS_SIGNING_SETTING = 'redis_signing_secret';

/** Fields are pino's convention: an object first, then the message. */
export interface RedisTierLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

export interface RedisTierStatus {
  /** `ok`: connected and subscribed; `degraded`: serving through the store alone (every guarantee kept, slower). */
  status: 'ok' | 'degraded';
  connected: boolean;
  subscribed: boolean;
}

export interface RedisTierOptions {
  url: string;
  store: Pick<Store, 'getOrCreateSetting'>;
  log: RedisTierLog;
  /** Default: `gatehouse:<deployment>:`, where the deployment is derived from the store's secret (see `namespaceOf`). */
  prefix?: string;
  barrierTimeoutMs?: number;
  /** REDIS_COMMAND_TIMEOUT: a Redis silent this long is down (see redisOptions). */
  commandTimeoutMs?: number;
}

/**
 * Replicas on one database share one namespace in Redis, and deployments on different
 * databases sharing a Redis never meet: another deployment's replicas would count as
 * receivers of our revocations without ever acknowledging them (they cannot read them).
 */
export function namespaceOf(signingSecret: string): string {
  return `${DEFAULT_REDIS_PREFIX}${createHash('sha256').update('namespace\n').update(signingSecret).digest('base64url').slice(0, 12)}:`;
}

/**
 * Everything Gatehouse shares between replicas through Redis (REDIS_URL): the identity tier,
 * the failure limiters and the revocation bus, over two connections (commands, and one in
 * subscriber mode). Opening never waits for Redis: with Redis away the gateway starts,
 * serves, and reports `degraded` until it is back.
 */
export class RedisTier {
  readonly commands: Redis;
  readonly subscriber: Redis;
  readonly identity: { tier: RedisIdentityTier; pepper: string };
  readonly #signer: RedisSigner;
  readonly #prefix: string;
  readonly #log: RedisTierLog;
  readonly #barrierTimeoutMs: number | undefined;
  readonly #replicaId: string;
  readonly #statusListeners: Array<(up: boolean) => void> = [];
  #bus: RevocationBus | undefined;
  #connected = false;
  /** Set by `close()`: the connections it ends are no outage, and nothing is logged of them. */
  #closing = false;

  static async open(options: RedisTierOptions): Promise<RedisTier> {
    const pepper = await options.store.getOrCreateSetting(IDENTITY_PEPPER_SETTING, randomBytes(32).toString('base64url'));
    const signing = await options.store.getOrCreateSetting(REDIS_SIGNING_SETTING, randomBytes(32).toString('base64url'));
    return new RedisTier(options, pepper, signing);
  }

  private constructor(options: RedisTierOptions, pepper: string, signing: string) {
    this.#prefix = options.prefix ?? namespaceOf(signing);
    this.#log = options.log;
    this.#barrierTimeoutMs = options.barrierTimeoutMs;
    this.#signer = new RedisSigner(signing);
    this.commands = createRedisConnection(options.url, {
      name: 'gatehouse:commands',
      commandTimeoutMs: options.commandTimeoutMs,
      onStatus: (up) => {
        this.#connected = up;
        if (this.#closing) return;
        if (up) this.#log.info({ event: 'redis_connected' }, 'Redis connected');
        else this.#log.warn({ event: 'redis_disconnected' }, 'Redis connection lost; serving through the store');
        this.#statusChanged();
      },
    });
    // The process id lets an operator match a replica's log lines and its connections in CLIENT LIST; the random part keeps ids unique across hosts.
    this.#replicaId = `p${process.pid}-${randomBytes(6).toString('base64url')}`;
    // Reconnection attempts fail every second while Redis is away: the status change above is the one line logged.
    this.subscriber = createRedisConnection(options.url, { name: `gatehouse:revocations:${this.#replicaId}`, commandTimeoutMs: options.commandTimeoutMs });
    this.identity = { tier: new RedisIdentityTier({ redis: this.commands, signer: this.#signer, prefix: this.#prefix }), pepper };
  }

  /** This deployment's key namespace in Redis, for other shared state (MCP session bindings). */
  get prefix(): string {
    return this.#prefix;
  }

  /** A failure limiter shared by all replicas, limiting with this replica's own counts while Redis is away. */
  limiter(name: string, limit: number, windowMs: number): RedisFailureLimiter {
    return new RedisFailureLimiter({ redis: this.commands, name, limit, windowMs, prefix: this.#prefix });
  }

  /** The rate limits counted by every replica together; each replica's own count while Redis is away. */
  rateLimiter(options: { observe?: RateLimitObserver; now?: () => number; onError?: (error: unknown) => void }): SharedRateLimiter {
    return new SharedRateLimiter({ redis: this.commands, prefix: this.#prefix, replicaId: this.#replicaId, ...options });
  }

  /** Starts the revocation bus: `evict` on every change received, `setDegraded` while changes may be missed. */
  startRevocations(handlers: { evict(keyId: number): void; endSession?(sessionId: string): void; setDegraded(degraded: boolean): void }): RevocationBus {
    if (this.#bus !== undefined) throw new Error('RedisTier: revocations already started');
    const bus = new RevocationBus({
      publisher: this.commands,
      subscriber: this.subscriber,
      signer: this.#signer,
      prefix: this.#prefix,
      replicaId: this.#replicaId,
      timeoutMs: this.#barrierTimeoutMs,
      evict: handlers.evict,
      ...(handlers.endSession === undefined ? {} : { endSession: handlers.endSession }),
      setDegraded: (degraded) => {
        handlers.setDegraded(degraded);
        this.#statusChanged();
      },
      onEvent: (event) => this.#logEvent(event),
    });
    this.#bus = bus;
    bus.start();
    return bus;
  }

  status(): RedisTierStatus {
    const subscribed = this.#bus !== undefined && !this.#bus.degraded;
    return { status: this.#connected && subscribed ? 'ok' : 'degraded', connected: this.#connected, subscribed };
  }

  /** Told `true`/`false` whenever the tier becomes fully up or degraded (for `gatehouse_dependency_up{dependency="redis"}`). */
  onStatus(listener: (up: boolean) => void): void {
    this.#statusListeners.push(listener);
    listener(this.status().status === 'ok');
  }

  async close(): Promise<void> {
    this.#closing = true;
    await this.#bus?.close();
    await Promise.all([closeRedisConnection(this.commands), closeRedisConnection(this.subscriber)]);
  }

  #statusChanged(): void {
    const up = this.status().status === 'ok';
    for (const listener of this.#statusListeners) listener(up);
  }

  #logEvent(event: RevocationBusEvent): void {
    switch (event.type) {
      case 'degraded':
        this.#log.warn(
          { event: 'revocations_degraded', reason: event.reason, replica: this.#replicaId },
          'revocation channel not proven live: key state is read from the store on every request until it is',
        );
        return;
      case 'subscribed':
        this.#log.info({ event: 'revocations_subscribed', replica: this.#replicaId }, 'revocation channel subscribed and proven; key state is cached again');
        return;
      case 'barrier_missed':
        this.#log.warn(
          { event: 'revocation_barrier_missed', subject: event.subject, receivers: event.receivers, acked: event.acked },
          'a replica did not acknowledge a revocation in time',
        );
        return;
      case 'barrier_lapsed':
        this.#log.warn(
          { event: 'revocation_barrier_lapsed', subject: event.subject, lapsed: event.lapsed, replicas: event.replicas },
          'a registered replica did not acknowledge a revocation; answered once its subscription lease had lapsed',
        );
        return;
      case 'publish_failed':
        this.#log.error(
          { event: 'revocation_publish_failed', subject: event.subject },
          'could not announce a key change through Redis; it is published when Redis is back',
        );
        return;
      case 'republished':
        this.#log.info({ event: 'revocation_republished', subject: event.subject }, 'announced a key change held while Redis was away');
        return;
      case 'ack_failed':
        this.#log.warn({ event: 'revocation_ack_failed', subject: event.subject }, 'evicted a key but could not acknowledge it');
        return;
      case 'message_rejected':
        this.#log.warn(
          { event: 'revocation_message_rejected', channel: event.channel },
          'ignored a revocation message not signed with this deployment\'s secret',
        );
        return;
    }
  }
}
