import { randomBytes, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { DEFAULT_REDIS_PREFIX } from './identity-tier.ts';
import type { RedisSigner } from './signer.ts';

/** How long a barrier waits for acknowledgements before it answers anyway (architecture.md: "bounded, say 2 s"). */
export const DEFAULT_BARRIER_TIMEOUT_MS = 2_000;
/**
 * The subscription is checked this often (PING on the subscriber connection, bounded by its
 * command timeout). Well under the barrier bound: a replica whose connection died without a
 * word has noticed it, and dropped its state cache, before a barrier it missed gives up on it.
 */
export const DEFAULT_HEARTBEAT_MS = 500;
/** Between attempts to PUBLISH while the connection is down, within the barrier bound. */
const PUBLISH_RETRY_MS = 100;
/** Changes not yet published, kept to publish when Redis returns (beyond that, evictions are lost to TTL only if nobody is degraded). */
const UNANNOUNCED_MAX = 10_000;

const CHANGE = 'revocation';
const ACK = 'revocation-ack';

/** What one barrier saw. `published: false`: Redis could not be reached within the bound; nobody was told. */
export interface BarrierResult {
  published: boolean;
  /** Subscribers that received the change (PUBLISH's reply), this replica's own included. */
  receivers: number;
  acked: number;
  /** Receivers that did not acknowledge within the bound. */
  missed: number;
  durationMs: number;
}

export type RevocationBusEvent =
  | { type: 'degraded'; reason: 'connection_lost' | 'subscribe_failed' | 'heartbeat_failed' }
  | { type: 'subscribed' }
  | { type: 'barrier_missed'; keyId: number; receivers: number; acked: number }
  | { type: 'publish_failed'; keyId: number }
  | { type: 'republished'; keyId: number }
  | { type: 'ack_failed'; keyId: number }
  | { type: 'message_rejected'; channel: 'changes' | 'acks' };

export interface RevocationBusOptions {
  /** Commands: PUBLISH of changes and acknowledgements. May be shared with other users. */
  publisher: Redis;
  /** Dedicated to this bus: it enters subscriber mode. */
  subscriber: Redis;
  /** Signs changes and acknowledgements; every replica must hold the same secret. */
  signer: RedisSigner;
  /** Drops one key's cached state; called for every change received, this replica's own included. */
  evict(keyId: number): void;
  /**
   * `true` when the subscription is (or may be) lost: changes may be missed, so key state
   * must be read from the store on every request. `false` once subscribed again. Called
   * with `true` by `start()`, before anything is subscribed.
   */
  setDegraded(degraded: boolean): void;
  onEvent?: (event: RevocationBusEvent) => void;
  /** Names this replica in acknowledgements; random by default. */
  replicaId?: string;
  prefix?: string;
  timeoutMs?: number;
  heartbeatMs?: number;
}

interface Pending {
  replicas: Set<string>;
  /** Unknown (Infinity) until PUBLISH has answered; acknowledgements may arrive before it does. */
  expected: number;
  done: () => void;
}

/**
 * The revocation barrier (architecture.md, "Revocation that is really immediate").
 *
 * `announce(keyId)` publishes `{keyId, nonce, origin}` on one channel, takes PUBLISH's
 * receiver count, and waits for that many acknowledgements, which replicas publish on the
 * origin's own channel, within `timeoutMs`. Every replica, the origin included, evicts the
 * key before it acknowledges. A replica whose subscription is down is degraded and reads
 * state from the store, so it needs no message; one that is subscribed is counted by PUBLISH
 * and waited for.
 */
export class RevocationBus {
  readonly #publisher: Redis;
  readonly #subscriber: Redis;
  readonly #signer: RedisSigner;
  readonly #evict: (keyId: number) => void;
  readonly #setDegraded: (degraded: boolean) => void;
  readonly #onEvent: (event: RevocationBusEvent) => void;
  readonly #replicaId: string;
  readonly #changes: string;
  readonly #acks: string;
  readonly #ackPrefix: string;
  readonly #timeoutMs: number;
  readonly #heartbeatMs: number;

  readonly #pending = new Map<string, Pending>();
  readonly #unannounced = new Set<number>();
  #degraded = true;
  /** Bumped whenever the subscriber connection is lost: a SUBSCRIBE answered on an older connection counts for nothing. */
  #connection = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  #pinging = false;
  #closed = false;
  readonly #listeners: Array<[Redis, string, (...args: unknown[]) => void]> = [];

  constructor(options: RevocationBusOptions) {
    this.#publisher = options.publisher;
    this.#subscriber = options.subscriber;
    this.#signer = options.signer;
    this.#evict = options.evict;
    this.#setDegraded = options.setDegraded;
    this.#onEvent = options.onEvent ?? (() => {});
    this.#replicaId = options.replicaId ?? randomBytes(9).toString('base64url');
    if (!isToken(this.#replicaId)) throw new RangeError('RevocationBus: replicaId must be 1-64 characters of [A-Za-z0-9_-]');
    const prefix = options.prefix ?? DEFAULT_REDIS_PREFIX;
    this.#changes = `${prefix}revocations`;
    this.#ackPrefix = `${prefix}revocation-acks:`;
    this.#acks = this.#ackPrefix + this.#replicaId;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_BARRIER_TIMEOUT_MS;
    this.#heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  }

  get replicaId(): string {
    return this.#replicaId;
  }

  /** True while changes may be missed (not subscribed). */
  get degraded(): boolean {
    return this.#degraded;
  }

  /** Degraded at once, subscribed as soon as the subscriber connection is ready. */
  start(): void {
    this.#setDegraded(true);
    this.#on(this.#subscriber, 'message', (channel: string, message: string) => this.#received(channel, message));
    this.#on(this.#subscriber, 'ready', () => void this.#subscribe());
    this.#on(this.#subscriber, 'close', () => this.#lost('connection_lost'));
    this.#on(this.#publisher, 'ready', () => void this.#republish());
    if (this.#subscriber.status === 'ready') void this.#subscribe();
    this.#heartbeat = setInterval(() => void this.#checkSubscription(), this.#heartbeatMs);
    this.#heartbeat.unref();
  }

  /**
   * Tells every subscribed replica that `keyId` changed and waits, at most `timeoutMs`, until
   * each has dropped it. Never rejects.
   */
  async announce(keyId: number): Promise<BarrierResult> {
    const started = performance.now();
    const deadline = started + this.#timeoutMs;
    const nonce = randomUUID();
    let done!: () => void;
    const acknowledged = new Promise<void>((resolve) => (done = resolve));
    const pending: Pending = { replicas: new Set(), expected: Infinity, done };
    this.#pending.set(nonce, pending);
    try {
      const message = this.#signer.sign(CHANGE, JSON.stringify({ keyId, nonce, origin: this.#replicaId }));
      const receivers = await this.#publishWithin(message, deadline);
      if (receivers === undefined) {
        this.#remember(keyId);
        this.#onEvent({ type: 'publish_failed', keyId });
        return { published: false, receivers: 0, acked: 0, missed: 0, durationMs: performance.now() - started };
      }
      pending.expected = receivers;
      if (pending.replicas.size >= receivers) done();
      await waitUntil(acknowledged, deadline - performance.now());
      const acked = Math.min(pending.replicas.size, receivers);
      const missed = receivers - acked;
      if (missed > 0) this.#onEvent({ type: 'barrier_missed', keyId, receivers, acked });
      return { published: true, receivers, acked, missed, durationMs: performance.now() - started };
    } finally {
      this.#pending.delete(nonce);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#heartbeat);
    for (const [emitter, event, listener] of this.#listeners) emitter.off(event, listener);
    this.#listeners.length = 0;
    for (const pending of this.#pending.values()) pending.done();
  }

  async #publishWithin(message: string, deadline: number): Promise<number | undefined> {
    for (;;) {
      try {
        return await this.#publisher.publish(this.#changes, message);
      } catch {
        if (this.#closed || performance.now() + PUBLISH_RETRY_MS >= deadline) return undefined;
        await sleep(PUBLISH_RETRY_MS);
      }
    }
  }

  #remember(keyId: number): void {
    if (this.#unannounced.size >= UNANNOUNCED_MAX) {
      const oldest = this.#unannounced.values().next().value;
      if (oldest !== undefined) this.#unannounced.delete(oldest);
    }
    this.#unannounced.add(keyId);
  }

  /**
   * Changes whose PUBLISH failed go out once Redis is back, unwaited: a replica that stayed
   * subscribed while this one could not publish (a partition) still drops the key then.
   */
  async #republish(): Promise<void> {
    for (const keyId of [...this.#unannounced]) {
      const message = this.#signer.sign(CHANGE, JSON.stringify({ keyId, nonce: randomUUID(), origin: this.#replicaId }));
      try {
        await this.#publisher.publish(this.#changes, message);
        this.#unannounced.delete(keyId);
        this.#onEvent({ type: 'republished', keyId });
      } catch {
        return;
      }
    }
  }

  #received(channel: string, message: string): void {
    if (channel === this.#changes) {
      const change = parseChange(this.#signer.open(CHANGE, message));
      if (change === undefined) {
        this.#onEvent({ type: 'message_rejected', channel: 'changes' });
        return;
      }
      // Evicted before acknowledging: an acknowledgement means this replica no longer holds the state.
      this.#evict(change.keyId);
      const ack = this.#signer.sign(ACK, JSON.stringify({ nonce: change.nonce, replica: this.#replicaId }));
      this.#publisher.publish(this.#ackPrefix + change.origin, ack).catch(() => {
        this.#onEvent({ type: 'ack_failed', keyId: change.keyId });
      });
    } else if (channel === this.#acks) {
      const ack = parseAck(this.#signer.open(ACK, message));
      if (ack === undefined) {
        this.#onEvent({ type: 'message_rejected', channel: 'acks' });
        return;
      }
      const pending = this.#pending.get(ack.nonce);
      if (pending === undefined) return;
      pending.replicas.add(ack.replica);
      if (pending.replicas.size >= pending.expected) pending.done();
    }
  }

  async #subscribe(): Promise<void> {
    if (this.#closed) return;
    const connection = this.#connection;
    try {
      await this.#subscriber.subscribe(this.#changes, this.#acks);
    } catch {
      if (connection !== this.#connection || this.#closed) return;
      this.#lost('subscribe_failed');
      // Start over on a fresh connection; its 'ready' subscribes again.
      this.#subscriber.disconnect(true);
      return;
    }
    if (connection !== this.#connection || this.#closed || !this.#degraded) return;
    this.#degraded = false;
    this.#setDegraded(false);
    this.#onEvent({ type: 'subscribed' });
  }

  #lost(reason: 'connection_lost' | 'subscribe_failed' | 'heartbeat_failed'): void {
    this.#connection++;
    if (this.#degraded || this.#closed) return;
    this.#degraded = true;
    this.#setDegraded(true);
    this.#onEvent({ type: 'degraded', reason });
  }

  /** A connection can die without a close (a partition): a PING that goes unanswered says so. */
  async #checkSubscription(): Promise<void> {
    if (this.#degraded || this.#pinging || this.#subscriber.status !== 'ready') return;
    this.#pinging = true;
    const connection = this.#connection;
    try {
      await this.#subscriber.ping();
    } catch {
      if (connection === this.#connection && !this.#closed) {
        this.#lost('heartbeat_failed');
        this.#subscriber.disconnect(true);
      }
    } finally {
      this.#pinging = false;
    }
  }

  #on<A extends unknown[]>(emitter: Redis, event: string, listener: (...args: A) => void): void {
    const untyped = listener as unknown as (...args: unknown[]) => void;
    emitter.on(event, untyped);
    this.#listeners.push([emitter, event, untyped]);
  }
}

function parseChange(text: string | undefined): { keyId: number; nonce: string; origin: string } | undefined {
  const value = parseObject(text);
  if (value === undefined) return undefined;
  const { keyId, nonce, origin } = value;
  if (!Number.isSafeInteger(keyId) || (keyId as number) <= 0) return undefined;
  if (!isToken(nonce) || !isToken(origin)) return undefined;
  return { keyId: keyId as number, nonce, origin };
}

function parseAck(text: string | undefined): { nonce: string; replica: string } | undefined {
  const value = parseObject(text);
  if (value === undefined) return undefined;
  const { nonce, replica } = value;
  if (!isToken(nonce) || !isToken(replica)) return undefined;
  return { nonce, replica };
}

function parseObject(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Nonces and replica ids: short, printable, safe in a channel name. */
function isToken(value: unknown): value is string {
  return typeof value === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(value);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves when `promise` does or after `ms`, whichever is first; never rejects. */
async function waitUntil(promise: Promise<void>, ms: number): Promise<void> {
  if (ms <= 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
