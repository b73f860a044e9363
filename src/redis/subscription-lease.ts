import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { ReplicaRegistry } from './replica-registry.ts';
import { signProof } from './revocation-messages.ts';
import type { RedisSigner } from './signer.ts';

export type DegradedReason = 'connection_lost' | 'subscribe_failed' | 'heartbeat_failed' | 'lease_expired';

export type LeaseEvent = { type: 'degraded'; reason: DegradedReason } | { type: 'subscribed' };

export interface SubscriptionLeaseOptions {
  /** Commands: the registration that carries each proof. */
  publisher: Redis;
  /** Dedicated to the bus: subscribed to `changes` and `own`. */
  subscriber: Redis;
  registry: ReplicaRegistry;
  signer: RedisSigner;
  /** The channel every replica's changes go out on. */
  changes: string;
  /** This replica's own channel: proofs come back on it (with acknowledgements). */
  own: string;
  heartbeatMs: number;
  leaseMs: number;
  /** A proof not received within this long means the subscription is broken: it is dropped and made again. */
  proofTimeoutMs: number;
  /** See RevocationBusOptions.setDegraded. */
  setDegraded(degraded: boolean): void;
  onEvent(event: LeaseEvent): void;
}

/** One proof in flight: sent at `sentAt` on subscriber connection number `connection`. */
interface Proof {
  nonce: string;
  sentAt: number;
  connection: number;
  timer: NodeJS.Timeout;
}

/**
 * The subscription and its lease (docs/adr/0003-revocation-barrier.md): whether this replica
 * may trust its cached key state. Every `heartbeatMs` it registers itself and publishes a proof
 * to its own channel in one step, and when the proof comes back through the subscription it
 * trusts its cache until the proof's send time + `leaseMs`. A timer, not a clock read per
 * request, ends the trust (`setDegraded(true)`).
 */
export class SubscriptionLease {
  readonly #publisher: Redis;
  readonly #subscriber: Redis;
  readonly #registry: ReplicaRegistry;
  readonly #signer: RedisSigner;
  readonly #changes: string;
  readonly #own: string;
  readonly #heartbeatMs: number;
  readonly #leaseMs: number;
  readonly #proofTimeoutMs: number;
  readonly #setDegraded: (degraded: boolean) => void;
  readonly #onEvent: (event: LeaseEvent) => void;

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

  constructor(options: SubscriptionLeaseOptions) {
    this.#publisher = options.publisher;
    this.#subscriber = options.subscriber;
    this.#registry = options.registry;
    this.#signer = options.signer;
    this.#changes = options.changes;
    this.#own = options.own;
    this.#heartbeatMs = options.heartbeatMs;
    this.#leaseMs = options.leaseMs;
    this.#proofTimeoutMs = options.proofTimeoutMs;
    this.#setDegraded = options.setDegraded;
    this.#onEvent = options.onEvent;
  }

  get trusted(): boolean {
    return this.#trusted;
  }

  /** Degraded at once; trusted as soon as the subscription is made and proven. */
  start(): void {
    this.#setDegraded(true);
    if (this.#subscriber.status === 'ready') void this.subscribe();
    this.#heartbeat = setInterval(() => void this.#prove(), this.#heartbeatMs);
    this.#heartbeat.unref();
  }

  /** Subscribes on the current connection (at start, and on every 'ready' of the subscriber). */
  async subscribe(): Promise<void> {
    if (this.#closed) return;
    const connection = this.#connection;
    try {
      await this.#subscriber.subscribe(this.#changes, this.#own);
    } catch {
      if (connection !== this.#connection || this.#closed) return;
      this.lost('subscribe_failed');
      // Start over on a fresh connection; its 'ready' subscribes again.
      this.#subscriber.disconnect(true);
      return;
    }
    if (connection !== this.#connection || this.#closed) return;
    this.#subscribedOn = connection;
    // Subscribed is not yet trusted: this replica is not registered, a barrier would not wait for it.
    void this.#prove();
  }

  /** A proof came back through the subscription: the lease runs from its send time. */
  proven(nonce: string): void {
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

  /** The subscription is gone (or cannot be trusted): nothing sent on the old connection counts. */
  lost(reason: DegradedReason): void {
    this.#connection++;
    this.#dropProof();
    clearTimeout(this.#lease);
    this.#lease = undefined;
    this.#distrust(reason);
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#lease);
    this.#dropProof();
    // No lease timer runs any more: whatever still asks this replica must read the store.
    if (this.#trusted) {
      this.#trusted = false;
      this.#setDegraded(true);
    }
  }

  /**
   * Registers this replica and publishes a proof to its own channel, in one step; the lease
   * starts when the proof comes back through the subscription (`proven`), counted from now.
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
      await this.#registry.register(this.#own, signProof(this.#signer, proof.nonce));
    } catch {
      this.#proofFailed(proof);
    }
  }

  /** A proof that failed or never came back: the subscription may be dead without a close (a partition). */
  #proofFailed(proof: Proof): void {
    if (this.#proof !== proof) return;
    this.#dropProof();
    if (proof.connection !== this.#connection || this.#closed) return;
    this.lost('heartbeat_failed');
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

  #distrust(reason: DegradedReason): void {
    if (!this.#trusted || this.#closed) return;
    this.#trusted = false;
    this.#setDegraded(true);
    this.#onEvent({ type: 'degraded', reason });
  }
}
