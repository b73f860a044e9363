import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Publication, ReplicaRegistry } from './replica-registry.ts';
import { describeSubject, signAck, signChange, type Ack, type Change, type Subject } from './revocation-messages.ts';
import type { RedisSigner } from './signer.ts';

/**
 * Added to a lease before a barrier treats a silent replica as lapsed: that replica's lease
 * timer may fire late by as much as its event loop lags.
 */
export const LEASE_MARGIN_MS = 200;
/** Between attempts to PUBLISH while the connection is down, within the barrier bound. */
const PUBLISH_RETRY_MS = 100;
/** Changes not yet published, kept to publish when Redis returns (beyond that, evictions are lost to TTL only if nobody is degraded). */
const UNANNOUNCED_MAX = 10_000;
/** Replica ids named in one `barrier_lapsed` event: enough to find them, bounded whatever the registry holds. */
const LAPSED_NAMED_MAX = 10;

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

export type BarrierEvent =
  | { type: 'barrier_missed'; subject: string; receivers: number; acked: number }
  | { type: 'barrier_lapsed'; subject: string; lapsed: number; replicas: string[] }
  | { type: 'publish_failed'; subject: string }
  | { type: 'republished'; subject: string }
  | { type: 'ack_failed'; subject: string };

export interface RevocationBarrierOptions {
  publisher: Redis;
  registry: ReplicaRegistry;
  signer: RedisSigner;
  replicaId: string;
  /** The channel every replica's changes go out on. */
  changes: string;
  /** Each replica's own channel is this + its id: acknowledgements of its changes go there. */
  ackPrefix: string;
  timeoutMs: number;
  /** Applies a change received: drops the key's state, or ends the session. */
  apply(subject: Subject): void;
  onEvent(event: BarrierEvent): void;
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

/**
 * Both ends of the barrier: the origin's (`announce`: publish a change, then wait for
 * acknowledgements or lapsed leases) and every replica's (`answer`: evict, then acknowledge).
 */
export class RevocationBarrier {
  readonly #publisher: Redis;
  readonly #registry: ReplicaRegistry;
  readonly #signer: RedisSigner;
  readonly #replicaId: string;
  readonly #changes: string;
  readonly #ackPrefix: string;
  readonly #timeoutMs: number;
  readonly #apply: (subject: Subject) => void;
  readonly #onEvent: (event: BarrierEvent) => void;

  readonly #pending = new Map<string, Pending>();
  /** By `describeSubject`: one entry per subject. */
  readonly #unannounced = new Map<string, Subject>();
  #closed = false;

  constructor(options: RevocationBarrierOptions) {
    this.#publisher = options.publisher;
    this.#registry = options.registry;
    this.#signer = options.signer;
    this.#replicaId = options.replicaId;
    this.#changes = options.changes;
    this.#ackPrefix = options.ackPrefix;
    this.#timeoutMs = options.timeoutMs;
    this.#apply = options.apply;
    this.#onEvent = options.onEvent;
  }

  /**
   * Tells every replica that `subject` changed and waits, at most `timeoutMs`, until each has
   * applied it or (registered, silent) has stopped trusting its cache. Never rejects.
   */
  async announce(subject: Subject): Promise<BarrierResult> {
    const started = performance.now();
    const deadline = started + this.#timeoutMs;
    const nonce = randomUUID();
    let done!: () => void;
    const acknowledged = new Promise<void>((resolve) => (done = resolve));
    const pending: Pending = { replicas: new Set(), expected: Infinity, registered: new Map(), lapsed: false, done };
    this.#pending.set(nonce, pending);
    let lapse: NodeJS.Timeout | undefined;
    try {
      const message = signChange(this.#signer, { subject, nonce, origin: this.#replicaId });
      const publication = await this.#publishWithin(message, deadline);
      if (publication === undefined) {
        this.#remember(subject);
        this.#onEvent({ type: 'publish_failed', subject: describeSubject(subject) });
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
      return this.#result(describeSubject(subject), pending, started);
    } finally {
      clearTimeout(lapse);
      this.#pending.delete(nonce);
    }
  }

  /** A change received (this replica's own included): applied, then acknowledged to its origin. */
  answer(change: Change): void {
    // Applied before acknowledging: an acknowledgement means this replica no longer holds the old state.
    this.#apply(change.subject);
    const ack = signAck(this.#signer, { nonce: change.nonce, replica: this.#replicaId });
    this.#publisher.publish(this.#ackPrefix + change.origin, ack).catch(() => {
      this.#onEvent({ type: 'ack_failed', subject: describeSubject(change.subject) });
    });
  }

  acknowledged(ack: Ack): void {
    const pending = this.#pending.get(ack.nonce);
    if (pending === undefined) return;
    pending.replicas.add(ack.replica);
    settle(pending);
  }

  /**
   * Changes whose PUBLISH failed go out once Redis is back, unwaited: a replica that stayed
   * subscribed while this one could not publish (a partition) still drops the key then.
   */
  async republish(): Promise<void> {
    for (const [described, subject] of [...this.#unannounced]) {
      const message = signChange(this.#signer, { subject, nonce: randomUUID(), origin: this.#replicaId });
      try {
        await this.#publisher.publish(this.#changes, message);
        this.#unannounced.delete(described);
        this.#onEvent({ type: 'republished', subject: described });
      } catch {
        return;
      }
    }
  }

  /** Answers every barrier still waiting; none retries PUBLISH any more. */
  close(): void {
    this.#closed = true;
    for (const pending of this.#pending.values()) pending.done();
  }

  #result(subject: string, pending: Pending, started: number): BarrierResult {
    const receivers = pending.expected;
    const acked = Math.min(pending.replicas.size, receivers);
    const silent = [...pending.registered.keys()].filter((replica) => !pending.replicas.has(replica));
    const lapsed = pending.lapsed ? silent : [];
    const missed = Math.max(receivers - acked, silent.length - lapsed.length);
    if (missed > 0) this.#onEvent({ type: 'barrier_missed', subject, receivers, acked });
    if (lapsed.length > 0) this.#onEvent({ type: 'barrier_lapsed', subject, lapsed: lapsed.length, replicas: lapsed.slice(0, LAPSED_NAMED_MAX) });
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

  #remember(subject: Subject): void {
    if (this.#unannounced.size >= UNANNOUNCED_MAX) {
      const oldest = this.#unannounced.keys().next().value;
      if (oldest !== undefined) this.#unannounced.delete(oldest);
    }
    this.#unannounced.set(describeSubject(subject), subject);
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
