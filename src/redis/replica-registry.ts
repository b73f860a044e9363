import type { Redis } from 'ioredis';
import type { RedisSigner } from './signer.ts';

/**
 * Entries older than this are deleted by the next heartbeat of any replica, and the whole set
 * expires this long after the last one: a crashed replica leaves nothing behind for long.
 */
export const REGISTRY_PRUNE_MS = 60_000;
/**
 * A replica counts as registered until its last registration + its lease + this slack (Redis's
 * clock): the slack covers a replica whose lease timer fires late (a busy event loop) and
 * jitter in Redis's clock. A replica that crashed slows barriers for at most lease + slack.
 */
export const REGISTRY_SLACK_MS = 1_000;
/** Members read by one barrier; far above any real deployment, so a flooded set costs a bounded read. */
const REGISTRY_READ_MAX = 1_000;
/** Only entries this recent are read at all (longer than any lease the barrier can honour). */
const REGISTRY_READ_WINDOW_MS = 10_000;

const MEMBER = 'revocation-replica';

/**
 * Registers, and proves the subscription, in one atomic step timed by Redis's clock: the entry
 * is written at the moment the proof is published, so a replica that holds a lease from this
 * proof is in the set that any later barrier reads. Pruning rides along (bounded set).
 * KEYS[1] registry; ARGV: member, proof channel, proof message, prune ms.
 */
const REGISTER = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[4]))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return redis.call('PUBLISH', ARGV[2], ARGV[3])
`;

/**
 * Publishes a change and reads the registry at the same instant (a script runs atomically):
 * every replica that could have trusted its cache when the change went out is in the answer.
 * KEYS[1] registry; ARGV: channel, message, read window ms, read max.
 */
const PUBLISH_AND_LIST = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local receivers = redis.call('PUBLISH', ARGV[1], ARGV[2])
local members = redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[3]), '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[4]))
return {receivers, now, members}
`;

/** What PUBLISH reached, and who was registered at that instant. */
export interface Publication {
  /** PUBLISH's reply: subscriptions Redis knew of, which misses one it has just dropped. */
  receivers: number;
  /** Replica id → its lease (ms), for every replica that may still trust its cache. */
  registered: Map<string, number>;
}

export interface ReplicaRegistryOptions {
  redis: Redis;
  signer: RedisSigner;
  prefix: string;
  replicaId: string;
  leaseMs: number;
}

/**
 * Which replicas may hold cached key state, in a sorted set (member → Redis time of its last
 * proof). A revoking replica cannot learn this from PUBLISH: a subscription Redis has just
 * dropped is not counted, yet its replica may not know and still trust its cache. Members are
 * signed, so whoever can write to Redis cannot pad the set to slow every revocation down.
 */
export class ReplicaRegistry {
  readonly #redis: Redis;
  readonly #signer: RedisSigner;
  readonly #key: string;
  readonly #member: string;

  constructor(options: ReplicaRegistryOptions) {
    this.#redis = options.redis;
    this.#signer = options.signer;
    this.#key = `${options.prefix}replicas`;
    // The lease travels with the entry: replicas of different versions may hold different leases.
    this.#member = options.signer.sign(MEMBER, JSON.stringify({ replica: options.replicaId, leaseMs: options.leaseMs }));
  }

  /** Registers this replica now and publishes `proof` on `channel`; resolves with PUBLISH's count. */
  async register(channel: string, proof: string): Promise<number> {
    return Number(await this.#redis.eval(REGISTER, 1, this.#key, this.#member, channel, proof, REGISTRY_PRUNE_MS));
  }

  /** PUBLISH, and the replicas registered at that instant that may still trust their caches. */
  async publish(channel: string, message: string): Promise<Publication> {
    const reply = await this.#redis.eval(PUBLISH_AND_LIST, 1, this.#key, channel, message, REGISTRY_READ_WINDOW_MS, REGISTRY_READ_MAX);
    const [receivers, now, members] = reply as [number, number, string[]];
    return { receivers: Number(receivers), registered: this.#live(members, Number(now)) };
  }

  /** Leaves the set (on close), so barriers after a graceful shutdown do not wait for this replica's lease. */
  async leave(): Promise<void> {
    await this.#redis.zrem(this.#key, this.#member);
  }

  #live(members: string[], now: number): Map<string, number> {
    const live = new Map<string, number>();
    for (let i = 0; i + 1 < members.length; i += 2) {
      const entry = parseMember(this.#signer.open(MEMBER, members[i]!));
      if (entry !== undefined && Number(members[i + 1]) + entry.leaseMs + REGISTRY_SLACK_MS > now) live.set(entry.replica, entry.leaseMs);
    }
    return live;
  }
}

function parseMember(text: string | undefined): { replica: string; leaseMs: number } | undefined {
  if (text === undefined) return undefined;
  try {
    const { replica, leaseMs } = JSON.parse(text) as Record<string, unknown>;
    if (typeof replica !== 'string' || !Number.isSafeInteger(leaseMs) || (leaseMs as number) <= 0) return undefined;
    return { replica, leaseMs: leaseMs as number };
  } catch {
    return undefined;
  }
}
