import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { DEFAULT_REDIS_COMMAND_TIMEOUT_MS } from './connection.ts';
import { DEFAULT_REDIS_PREFIX } from './identity-tier.ts';
import { ReplicaRegistry } from './replica-registry.ts';
import { RevocationBarrier, type BarrierEvent, type BarrierResult } from './revocation-barrier.ts';
import { isToken, openAck, openChange, openProof } from './revocation-messages.ts';
import type { RedisSigner } from './signer.ts';
import { SubscriptionLease, type LeaseEvent } from './subscription-lease.ts';

export { LEASE_MARGIN_MS, type BarrierResult } from './revocation-barrier.ts';
export type { DegradedReason } from './subscription-lease.ts';

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
/** The subscription is proved this often: several proofs per lease, so one slow proof never costs the cache. */
export const DEFAULT_HEARTBEAT_MS = 250;

/** The lease's events (`degraded`, `subscribed`), the barrier's, and messages that failed their signature or shape. */
export type RevocationBusEvent = LeaseEvent | BarrierEvent | { type: 'message_rejected'; channel: 'changes' | 'acks' };

export interface RevocationBusOptions {
  /** Commands: PUBLISH of changes and acknowledgements, the registry. May be shared with other users. */
  publisher: Redis;
  /** Dedicated to this bus: it enters subscriber mode. */
  subscriber: Redis;
  /** Signs changes, acknowledgements, proofs and registry entries; every replica must hold the same secret. */
  signer: RedisSigner;
  /** Drops one key's cached state; called for every change received, this replica's own included. */
  evict(keyId: number): void;
  /** Ends one admin session in this replica's memory; called for every session end received, this replica's own included. */
  endSession?(sessionId: string): void;
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
  readonly #barrier: RevocationBarrier;
  readonly #lease: SubscriptionLease;
  readonly #onEvent: (event: RevocationBusEvent) => void;
  readonly #replicaId: string;
  readonly #changes: string;
  readonly #acks: string;
  readonly #listeners: Array<[Redis, string, (...args: unknown[]) => void]> = [];

  constructor(options: RevocationBusOptions) {
    this.#publisher = options.publisher;
    this.#subscriber = options.subscriber;
    this.#signer = options.signer;
    this.#onEvent = options.onEvent ?? (() => {});
    this.#replicaId = options.replicaId ?? randomBytes(9).toString('base64url');
    if (!isToken(this.#replicaId)) throw new RangeError('RevocationBus: replicaId must be 1-64 characters of [A-Za-z0-9_-]');
    const prefix = options.prefix ?? DEFAULT_REDIS_PREFIX;
    this.#changes = `${prefix}revocations`;
    const ackPrefix = `${prefix}revocation-acks:`;
    this.#acks = ackPrefix + this.#replicaId;
    const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    if (!Number.isSafeInteger(leaseMs) || leaseMs <= 0) throw new RangeError('RevocationBus: leaseMs must be a positive integer');
    this.#registry = new ReplicaRegistry({ redis: this.#publisher, signer: this.#signer, prefix, replicaId: this.#replicaId, leaseMs });
    this.#barrier = new RevocationBarrier({
      publisher: this.#publisher,
      registry: this.#registry,
      signer: this.#signer,
      replicaId: this.#replicaId,
      changes: this.#changes,
      ackPrefix,
      timeoutMs: options.timeoutMs ?? DEFAULT_BARRIER_TIMEOUT_MS,
      apply: (subject) => {
        if ('keyId' in subject) options.evict(subject.keyId);
        else options.endSession?.(subject.sessionId);
      },
      onEvent: this.#onEvent,
    });
    this.#lease = new SubscriptionLease({
      publisher: this.#publisher,
      subscriber: this.#subscriber,
      registry: this.#registry,
      signer: this.#signer,
      changes: this.#changes,
      own: this.#acks,
      heartbeatMs: options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
      leaseMs,
      proofTimeoutMs: options.proofTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
      setDegraded: options.setDegraded,
      onEvent: this.#onEvent,
    });
  }

  get replicaId(): string {
    return this.#replicaId;
  }

  /** True while changes may be missed (the subscription is not proven live). */
  get degraded(): boolean {
    return !this.#lease.trusted;
  }

  /** Degraded at once; trusted as soon as the subscription is made and proven. */
  start(): void {
    this.#on(this.#subscriber, 'message', (channel: string, message: string) => this.#received(channel, message));
    this.#on(this.#subscriber, 'ready', () => void this.#lease.subscribe());
    this.#on(this.#subscriber, 'close', () => this.#lease.lost('connection_lost'));
    this.#on(this.#publisher, 'ready', () => void this.#barrier.republish());
    this.#lease.start();
  }

  /**
   * Tells every replica that `keyId` changed and waits, at most `timeoutMs`, until each has
   * dropped it or (registered, silent) has stopped trusting its cache. Never rejects.
   */
  announce(keyId: number): Promise<BarrierResult> {
    return this.#barrier.announce({ keyId });
  }

  /** The same barrier for an admin session that ended: every replica refuses its token before this resolves. */
  announceSessionEnd(sessionId: string): Promise<BarrierResult> {
    return this.#barrier.announce({ sessionId });
  }

  async close(): Promise<void> {
    this.#lease.close();
    for (const [emitter, event, listener] of this.#listeners) emitter.off(event, listener);
    this.#listeners.length = 0;
    this.#barrier.close();
    if (this.#publisher.status === 'ready') await this.#registry.leave().catch(() => {});
  }

  /** Changes go to the barrier; on this replica's own channel, acknowledgements to the barrier and proofs to the lease. */
  #received(channel: string, message: string): void {
    if (channel === this.#changes) {
      const change = openChange(this.#signer, message);
      if (change === undefined) {
        this.#onEvent({ type: 'message_rejected', channel: 'changes' });
        return;
      }
      this.#barrier.answer(change);
    } else if (channel === this.#acks) {
      const ack = openAck(this.#signer, message);
      if (ack !== undefined) {
        this.#barrier.acknowledged(ack);
        return;
      }
      const proof = openProof(this.#signer, message);
      if (proof === undefined) {
        this.#onEvent({ type: 'message_rejected', channel: 'acks' });
        return;
      }
      this.#lease.proven(proof.nonce);
    }
  }

  #on<A extends unknown[]>(emitter: Redis, event: string, listener: (...args: A) => void): void {
    const untyped = listener as unknown as (...args: unknown[]) => void;
    emitter.on(event, untyped);
    this.#listeners.push([emitter, event, untyped]);
  }
}
