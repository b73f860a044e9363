import { randomBytes, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { DEFAULT_REDIS_COMMAND_TIMEOUT_MS } from './connection.ts';
import { DEFAULT_REDIS_PREFIX } from './identity-tier.ts';
import { ReplicaRegistry, type Publication } from './replica-registry.ts';
import type { RedisSigner } from './signer.ts';

/** How long a barrier waits for acknowledgements before it answers anyway (docs/adr/0003-revocation-barrier.md: at most 2 s). */
export const DEFAULT_BARRIER_TIMEOUT_MS = 2_000;
/**
 * How long one proof of the subscription lets a replica trust its cached key state, counted
 * from the moment the proof was sent. Redis can drop a subscription (CLIENT KILL, an output
 * buffer limit, a failover) before the replica hears of it, and PUBLISH then counts it out: a
 * barrier cannot wait for it, so it waits this long instead, after which that replica has
 * stopped trusting its cache by itself. Lease + margin must stay below the barrier bound.
 */
export const DEFAULT_LEASE_MS = 1_000;
/**
 * Added to a lease before a barrier treats a silent replica as lapsed: that replica's lease
 * timer may fire late by as much as its event loop lags.
 */
export const LEASE_MARGIN_MS = 200;
/** The subscription is proved this often: several proofs per lease, so one slow proof never costs the cache. */
export const DEFAULT_HEARTBEAT_MS = 250;
/** Between attempts to PUBLISH while the connection is down, within the barrier bound. */
const PUBLISH_RETRY_MS = 100;
/** Changes not yet published, kept to publish when Redis returns (beyond that, evictions are lost to TTL only if nobody is degraded). */
const UNANNOUNCED_MAX = 10_000;
/** Replica ids named in one `barrier_lapsed` event: enough to find them, bounded whatever the registry holds. */
const LAPSED_NAMED_MAX = 10;

const CHANGE = 'revocation';
const ACK = 'revocation-ack';
const PROOF = 'revocation-proof';

/** What one barrier saw. `published: false`: Redis could not be reached within the bound; nobody was told. */
export interface BarrierResult {
  published: boolean;
  /** Subscribers that received the change (PUBLISH's reply), this replica's own included. */
  receivers: number;
  acked: number;
  /** Receivers, or registered replicas still within their lease, that did not acknowledge within the bound. */
  missed: number;
  /** Replicas registered when the change went out (they may have trusted their caches then), this one included. */
  registered: number;
  /**
   * Registered replicas that never acknowledged, answered for once their lease had lapsed:
   * their subscription was lost (they stopped trusting their caches by themselves).
   */
  lapsed: number;
  durationMs: number;
}

export type DegradedReason = 'connection_lost' | 'subscribe_failed' | 'heartbeat_failed' | 'lease_expired';

export type RevocationBusEvent =
  | { type: 'degraded'; reason: DegradedReason }
  | { type: 'subscribed' }
  | { type: 'barrier_missed'; keyId: number; receivers: number; acked: number }
  | { type: 'barrier_lapsed'; keyId: number; lapsed: number; replicas: string[] }
  | { type: 'publish_failed'; keyId: number }
  | { type: 'republished'; keyId: number }
  | { type: 'ack_failed'; keyId: number }
  | { type: 'message_rejected'; channel: 'changes' | 'acks' };

export interface RevocationBusOptions {
  /** Commands: PUBLISH of changes and acknowledgements, the registry. May be shared with other users. */
  publisher: Redis;
  /** Dedicated to this bus: it enters subscriber mode. */
  subscriber: Redis;
  /** Signs changes, acknowledgements, proofs and registry entries; every replica must hold the same secret. */
  signer: RedisSigner;
  /** Drops one key's cached state; called for every change received, this replica's own included. */
  evict(keyId: number): void;
  /**
   * `true` when the subscription is not proven live (lost, or its lease lapsed): changes may be
   * missed, so key state must be read from the store on every request. `false` once proven
   * again. Called with `true` by `start()`, before anything is subscribed, and by `close()`.
   */
  setDegraded(degraded: boolean): void;
  onEvent?: (event: RevocationBusEvent) => void;
  /** Names this replica in acknowledgements and the registry; random by default. */
  replicaId?: string;
  prefix?: string;
  timeoutMs?: number;
  heartbeatMs?: number;
  leaseMs?: number;
  /** A proof not received within this long means the subscription is broken: it is dropped and made again. */
  proofTimeoutMs?: number;
}

interface Pending {
  replicas: Set<string>;
  /** Unknown (Infinity) until PUBLISH has answered; acknowledgements may arrive before it does. */
  expected: number;
  /** Replicas registered when PUBLISH ran; unknown (empty) until it has answered. */
  registered: Map<string, number>;
  /** Set by a timer once every registered replica that has not acknowledged has stopped trusting its cache. */
  lapsed: boolean;
  done: () => void;
}

/** One proof in flight: sent at `sentAt` on subscriber connection number `connection`. */
interface Proof {
  nonce: string;
  sentAt: number;
  connection: number;
  timer: NodeJS.Timeout;
}

/**
 * The revocation barrier (docs/adr/0003-revocation-barrier.md).
 *
 * `announce(keyId)` publishes `{keyId, nonce, origin}` on one channel and, in the same atomic
 * step, reads the registry of replicas; it then waits, within `timeoutMs`, for PUBLISH's count
 * of acknowledgements and for one from every registered replica, which publish them on the
 * origin's own channel after evicting the key. A registered replica that stays silent is
 * waited for until its lease has lapsed, and no longer: by then it reads state from the store.
 *
 * The lease: a replica trusts its cached state only while its subscription is proven. Every
 * `heartbeatMs` it registers itself and publishes a proof to its own channel in one step, and
 * when the proof comes back through its subscription it trusts its cache until the proof's send
 * time + `leaseMs`. A timer, not a clock read per request, ends the trust (`setDegraded(true)`).
 */
export class RevocationBus {
  readonly #publisher: Redis;
  readonly #subscriber: Redis;
  readonly #signer: RedisSigner;
  readonly #registry: ReplicaRegistry;
  readonly #evict: (keyId: number) => void;
  readonly #setDegraded: (degraded: boolean) => void;
  readonly #onEvent: (event: RevocationBusEvent) => void;
  readonly #replicaId: string;
  readonly #changes: string;
  readonly #acks: string;
  readonly #ackPrefix: string;
  readonly #timeoutMs: number;
  readonly #heartbeatMs: number;
  readonly #leaseMs: number;
  readonly #proofTimeoutMs: number;

  readonly #pending = new Map<string, Pending>();
  readonly #unannounced = new Set<number>();
  /** True while a proof's lease runs: cached key state may be used. */
  #trusted = false;
  /** Bumped whenever the subscriber connection is lost: a SUBSCRIBE or proof answered on an older connection counts for nothing. */
  #connection = 0;
  /** The connection number whose SUBSCRIBE succeeded; proofs are sent only while it is the current one. */
  #subscribedOn = -1;
  #proof: Proof | undefined;
  #lease: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
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
    this.#leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    this.#proofTimeoutMs = options.proofTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS;
    if (!Number.isSafeInteger(this.#leaseMs) || this.#leaseMs <= 0) throw new RangeError('RevocationBus: leaseMs must be a positive integer');
    this.#registry = new ReplicaRegistry({ redis: this.#publisher, signer: this.#signer, prefix, replicaId: this.#replicaId, leaseMs: this.#leaseMs });
  }

  get replicaId(): string {
    return this.#replicaId;
  }

  /** True while changes may be missed (the subscription is not proven live). */
  get degraded(): boolean {
    return !this.#trusted;
  }

  /** Degraded at once; trusted as soon as the subscription is made and proven. */
  start(): void {
    this.#setDegraded(true);
    this.#on(this.#subscriber, 'message', (channel: string, message: string) => this.#received(channel, message));
    this.#on(this.#subscriber, 'ready', () => void this.#subscribe());
    this.#on(this.#subscriber, 'close', () => this.#lost('connection_lost'));
    this.#on(this.#publisher, 'ready', () => void this.#republish());
    if (this.#subscriber.status === 'ready') void this.#subscribe();
    this.#heartbeat = setInterval(() => void this.#prove(), this.#heartbeatMs);
    this.#heartbeat.unref();
  }

  /**
   * Tells every replica that `keyId` changed and waits, at most `timeoutMs`, until each has
   * dropped it or (registered, silent) has stopped trusting its cache. Never rejects.
   */
  async announce(keyId: number): Promise<BarrierResult> {
    const started = performance.now();
    const deadline = started + this.#timeoutMs;
    const nonce = randomUUID();
    let done!: () => void;
    const acknowledged = new Promise<void>((resolve) => (done = resolve));
    const pending: Pending = { replicas: new Set(), expected: Infinity, registered: new Map(), lapsed: false, done };
    this.#pending.set(nonce, pending);
    let lapse: NodeJS.Timeout | undefined;
    try {
      const message = this.#signer.sign(CHANGE, JSON.stringify({ keyId, nonce, origin: this.#replicaId }));
      const publication = await this.#publishWithin(message, deadline);
      if (publication === undefined) {
        this.#remember(keyId);
        this.#onEvent({ type: 'publish_failed', keyId });
        return { published: false, receivers: 0, acked: 0, missed: 0, registered: 0, lapsed: 0, durationMs: performance.now() - started };
      }
      const { receivers, registered } = publication;
      pending.expected = receivers;
      pending.registered = registered;
      // Counted from PUBLISH's answer, which is after Redis ran it: every lease a silent replica holds ends before then.
      const lapseIn = Math.max(0, ...registered.values()) + LEASE_MARGIN_MS;
      if (performance.now() + lapseIn < deadline) {
        lapse = setTimeout(() => {
          pending.lapsed = true;
          settle(pending);
        }, lapseIn);
      }
      settle(pending);
      await waitUntil(acknowledged, deadline - performance.now());
      return this.#result(keyId, pending, started);
    } finally {
      clearTimeout(lapse);
      this.#pending.delete(nonce);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#lease);
    this.#dropProof();
    for (const [emitter, event, listener] of this.#listeners) emitter.off(event, listener);
    this.#listeners.length = 0;
    for (const pending of this.#pending.values()) pending.done();
    // No lease timer runs any more: whatever still asks this replica must read the store.
    if (this.#trusted) {
      this.#trusted = false;
      this.#setDegraded(true);
    }
    if (this.#publisher.status === 'ready') await this.#registry.leave().catch(() => {});
  }

  #result(keyId: number, pending: Pending, started: number): BarrierResult {
    const receivers = pending.expected;
    const acked = Math.min(pending.replicas.size, receivers);
    const silent = [...pending.registered.keys()].filter((replica) => !pending.replicas.has(replica));
    const lapsed = pending.lapsed ? silent : [];
    const missed = Math.max(receivers - acked, silent.length - lapsed.length);
    if (missed > 0) this.#onEvent({ type: 'barrier_missed', keyId, receivers, acked });
    if (lapsed.length > 0) this.#onEvent({ type: 'barrier_lapsed', keyId, lapsed: lapsed.length, replicas: lapsed.slice(0, LAPSED_NAMED_MAX) });
    return {
      published: true,
      receivers,
      acked,
      missed,
      registered: pending.registered.size,
      lapsed: lapsed.length,
      durationMs: performance.now() - started,
    };
  }

  async #publishWithin(message: string, deadline: number): Promise<Publication | undefined> {
    for (;;) {
      try {
        return await this.#registry.publish(this.#changes, message);
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
      if (ack !== undefined) {
        this.#acknowledged(ack);
        return;
      }
      const proof = parseProof(this.#signer.open(PROOF, message));
      if (proof === undefined) {
        this.#onEvent({ type: 'message_rejected', channel: 'acks' });
        return;
      }
      this.#proven(proof.nonce);
    }
  }

  #acknowledged(ack: { nonce: string; replica: string }): void {
    const pending = this.#pending.get(ack.nonce);
    if (pending === undefined) return;
    pending.replicas.add(ack.replica);
    settle(pending);
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
    if (connection !== this.#connection || this.#closed) return;
    this.#subscribedOn = connection;
    // Subscribed is not yet trusted: this replica is not registered, a barrier would not wait for it.
    void this.#prove();
  }

  /**
   * Registers this replica and publishes a proof to its own channel, in one step; the lease
   * starts when the proof comes back through the subscription (`#proven`), counted from now.
   */
  async #prove(): Promise<void> {
    if (this.#closed || this.#proof !== undefined || this.#subscribedOn !== this.#connection) return;
    // Without a command connection nothing can be proven; the lease runs out by itself.
    if (this.#publisher.status !== 'ready') return;
    const proof: Proof = {
      nonce: randomUUID(),
      sentAt: performance.now(),
      connection: this.#connection,
      timer: setTimeout(() => this.#proofFailed(proof), this.#proofTimeoutMs),
    };
    proof.timer.unref();
    this.#proof = proof;
    try {
      await this.#registry.register(this.#acks, this.#signer.sign(PROOF, JSON.stringify({ nonce: proof.nonce })));
    } catch {
      this.#proofFailed(proof);
    }
  }

  #proven(nonce: string): void {
    const proof = this.#proof;
    if (proof === undefined || proof.nonce !== nonce) return;
    this.#dropProof();
    if (proof.connection !== this.#connection || this.#closed) return;
    const remaining = proof.sentAt + this.#leaseMs - performance.now();
    if (remaining <= 0) return;
    clearTimeout(this.#lease);
    this.#lease = setTimeout(() => this.#lapsed(), remaining);
    this.#lease.unref();
    if (this.#trusted) return;
    this.#trusted = true;
    this.#setDegraded(false);
    this.#onEvent({ type: 'subscribed' });
  }

  /** A proof that failed or never came back: the subscription may be dead without a close (a partition). */
  #proofFailed(proof: Proof): void {
    if (this.#proof !== proof) return;
    this.#dropProof();
    if (proof.connection !== this.#connection || this.#closed) return;
    this.#lost('heartbeat_failed');
    this.#subscriber.disconnect(true);
  }

  #dropProof(): void {
    if (this.#proof === undefined) return;
    clearTimeout(this.#proof.timer);
    this.#proof = undefined;
  }

  #lapsed(): void {
    this.#lease = undefined;
    this.#distrust('lease_expired');
  }

  #lost(reason: DegradedReason): void {
    this.#connection++;
    this.#dropProof();
    clearTimeout(this.#lease);
    this.#lease = undefined;
    this.#distrust(reason);
  }

  #distrust(reason: DegradedReason): void {
    if (!this.#trusted || this.#closed) return;
    this.#trusted = false;
    this.#setDegraded(true);
    this.#onEvent({ type: 'degraded', reason });
  }

  #on<A extends unknown[]>(emitter: Redis, event: string, listener: (...args: A) => void): void {
    const untyped = listener as unknown as (...args: unknown[]) => void;
    emitter.on(event, untyped);
    this.#listeners.push([emitter, event, untyped]);
  }
}

/**
 * Answers a barrier once PUBLISH's count of replicas has acknowledged and every registered
 * replica has too, or has had its lease lapse (it then reads the store and needs no message).
 */
function settle(pending: Pending): void {
  if (pending.replicas.size < pending.expected) return;
  if (pending.lapsed) {
    pending.done();
    return;
  }
  for (const replica of pending.registered.keys()) if (!pending.replicas.has(replica)) return;
  pending.done();
}

function parseProof(text: string | undefined): { nonce: string } | undefined {
  const value = parseObject(text);
  if (value === undefined || !isToken(value.nonce)) return undefined;
  return { nonce: value.nonce };
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
