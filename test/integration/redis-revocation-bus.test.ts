import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { DEFAULT_LEASE_MS, LEASE_MARGIN_MS, RevocationBus, type RevocationBusEvent } from '../../src/redis/revocation-bus.ts';
import { RedisSigner } from '../../src/redis/signer.ts';
import { KeyVerifier } from '../../src/verify/key-verifier.ts';
import { freePort } from '../support/gateway-process.ts';
import { privateRedis, redisServerAvailable, type PrivateRedis } from '../support/redis-server.ts';
import { describeWithRedis, redisUrl } from '../support/services.ts';
import { until } from '../support/until.ts';
import { codeOf, KeyTable, T0, tinyHasher } from '../unit/verify/support.ts';

interface Replica {
  name: string;
  publisher: Redis;
  subscriber: Redis;
  bus: RevocationBus;
  evicted: number[];
  degraded: boolean[];
  events: RevocationBusEvent[];
}

const opened: Replica[] = [];

function replica(
  url: string,
  options: {
    prefix: string;
    signer: RedisSigner;
    timeoutMs?: number;
    heartbeatMs?: number;
    leaseMs?: number;
    evict?: (keyId: number) => void;
    setDegraded?: (degraded: boolean) => void;
  },
): Replica {
  const name = `test:bus-${randomBytes(4).toString('hex')}`;
  const publisher = createRedisConnection(url, { name: `${name}:commands` });
  const subscriber = createRedisConnection(url, { name: `${name}:subscriber` });
  const evicted: number[] = [];
  const degraded: boolean[] = [];
  const events: RevocationBusEvent[] = [];
  const bus = new RevocationBus({
    publisher,
    subscriber,
    signer: options.signer,
    prefix: options.prefix,
    timeoutMs: options.timeoutMs ?? 2_000,
    heartbeatMs: options.heartbeatMs,
    leaseMs: options.leaseMs,
    evict: (keyId) => {
      evicted.push(keyId);
      options.evict?.(keyId);
    },
    setDegraded: (value) => {
      degraded.push(value);
      options.setDegraded?.(value);
    },
    onEvent: (event) => events.push(event),
  });
  bus.start();
  const made = { name, publisher, subscriber, bus, evicted, degraded, events };
  opened.push(made);
  return made;
}

async function subscribed(...replicas: Replica[]): Promise<void> {
  await vi.waitFor(() => expect(replicas.map((r) => r.bus.degraded)).toEqual(replicas.map(() => false)), { timeout: 15_000 });
}

async function closeAll(): Promise<void> {
  for (const made of opened.splice(0)) {
    await made.bus.close();
    await closeRedisConnection(made.publisher);
    await closeRedisConnection(made.subscriber);
  }
}

/** Kills a replica's subscriber connection from the server side, as a network cut or a Redis failover would. */
async function killConnection(admin: Redis, connectionName: string): Promise<void> {
  const list = await admin.client('LIST');
  const line = String(list).split('\n').find((entry) => entry.includes(` name=${connectionName} `));
  if (line === undefined) throw new Error(`no connection named ${connectionName}`);
  const id = /(?:^|\s)id=(\d+)/.exec(line)![1]!;
  await admin.client('KILL', 'ID', id);
}

describeWithRedis('RevocationBus (shared Redis)', () => {
  const prefix = `gh-test-${randomBytes(4).toString('hex')}:`;
  const signer = new RedisSigner(randomBytes(32));
  let admin: Redis;

  beforeAll(async () => {
    admin = createRedisConnection(redisUrl()!, { name: 'test:bus-admin' });
    await vi.waitFor(() => expect(admin.status).toBe('ready'));
  });
  afterEach(closeAll);
  afterAll(() => closeRedisConnection(admin));

  it('starts degraded, and is no longer degraded once subscribed', async () => {
    const a = replica(redisUrl()!, { prefix, signer });
    expect(a.degraded[0]).toBe(true);
    await subscribed(a);
    expect(a.degraded).toEqual([true, false]);
    expect(a.events).toContainEqual({ type: 'subscribed' });
  });

  it('waits until every subscribed replica, its own included, has evicted the key', async () => {
    const replicas = [0, 1, 2].map(() => replica(redisUrl()!, { prefix, signer }));
    await subscribed(...replicas);
    const result = await replicas[0]!.bus.announce(17);
    expect(result).toMatchObject({ published: true, receivers: 3, acked: 3, missed: 0 });
    for (const made of replicas) expect(made.evicted).toEqual([17]);
  });

  it('evicts on every replica before the barrier returns (the verifier refuses the revoked key at once)', async () => {
    const hasher = tinyHasher();
    const store = new KeyTable();
    const { key, row } = await store.add(hasher);
    const verifiers = [0, 1, 2].map(() => new KeyVerifier({ store, hasher, stateTtlMs: 60 * 60_000 }));
    const replicas = verifiers.map((verifier) =>
      replica(redisUrl()!, { prefix, signer, evict: (keyId) => verifier.evict(keyId), setDegraded: (d) => verifier.setDegraded(d) }),
    );
    await subscribed(...replicas);
    for (const verifier of verifiers) await verifier.verify(key);
    for (const verifier of verifiers) expect(verifier.tryVerifyCached(key)).toBeDefined();

    store.rows.get(row.id)!.revokedAt = new Date(T0);
    const result = await replicas[1]!.bus.announce(row.id);
    expect(result.missed).toBe(0);
    for (const verifier of verifiers) {
      expect(verifier.tryVerifyCached(key)).toBeUndefined();
      expect(await codeOf(() => verifier.verify(key))).toBe('revoked_credential');
    }
  });

  it('counts a subscriber that never acknowledges as missed, and answers at the bound', async () => {
    const a = replica(redisUrl()!, { prefix, signer, timeoutMs: 300 });
    await subscribed(a);
    const silent = createRedisConnection(redisUrl()!, { name: 'test:silent' });
    try {
      await vi.waitFor(() => expect(silent.status).toBe('ready'));
      await silent.subscribe(`${prefix}revocations`);
      const result = await a.bus.announce(5);
      // Missed: it waited out its bound for the silent one, then answered (a hang fails the test's own timeout).
      expect(result).toMatchObject({ published: true, receivers: 2, acked: 1, missed: 1 });
      expect(a.events).toContainEqual({ type: 'barrier_missed', subject: 'key 5', receivers: 2, acked: 1 });
    } finally {
      silent.disconnect();
    }
  });

  it('ignores changes and acknowledgements not signed with the shared secret', async () => {
    const a = replica(redisUrl()!, { prefix, signer, timeoutMs: 300 });
    const impostor = replica(redisUrl()!, { prefix, signer: new RedisSigner(randomBytes(32)), timeoutMs: 300 });
    await subscribed(a, impostor);

    // The impostor's change: a never evicts. a's change: the impostor receives it, cannot read it, never acks.
    await impostor.bus.announce(3);
    expect(a.evicted).toEqual([]);
    expect(a.events).toContainEqual({ type: 'message_rejected', channel: 'changes' });
    const result = await a.bus.announce(4);
    expect(result).toMatchObject({ receivers: 2, acked: 1, missed: 1 });

    // A forged acknowledgement on a's own channel counts for nothing.
    const forged = new RedisSigner(randomBytes(32)).sign('revocation-ack', JSON.stringify({ nonce: 'x', replica: 'y' }));
    await admin.publish(`${prefix}revocation-acks:${a.bus.replicaId}`, forged);
    await vi.waitFor(() => expect(a.events).toContainEqual({ type: 'message_rejected', channel: 'acks' }));
  });

  it('a replica that loses its subscription is degraded at once, then resubscribes and receives changes again', async () => {
    const a = replica(redisUrl()!, { prefix, signer });
    const b = replica(redisUrl()!, { prefix, signer });
    await subscribed(a, b);
    await killConnection(admin, `${b.name}:subscriber`);
    await vi.waitFor(() => expect(b.degraded).toEqual([true, false, true]));
    expect(b.events).toContainEqual({ type: 'degraded', reason: 'connection_lost' });

    await subscribed(b);
    expect(b.degraded).toEqual([true, false, true, false]);
    const result = await a.bus.announce(8);
    expect(result).toMatchObject({ receivers: 2, acked: 2, missed: 0 });
    expect(b.evicted).toEqual([8]);
  });

  it('reports an unpublished change when Redis is unreachable, within the bound', async () => {
    const a = replica(`redis://127.0.0.1:${await freePort()}`, { prefix, signer, timeoutMs: 400 });
    const result = await a.bus.announce(9);
    expect(result).toMatchObject({ published: false, receivers: 0, acked: 0, missed: 0 });
    expect(a.events).toContainEqual({ type: 'publish_failed', subject: 'key 9' });
    expect(a.bus.degraded).toBe(true);
  });
});


describeWithRedis('RevocationBus: subscription lease and replica registry (shared Redis)', () => {
  const prefix = `gh-test-${randomBytes(4).toString('hex')}:`;
  const signer = new RedisSigner(randomBytes(32));
  let admin: Redis;

  beforeAll(async () => {
    admin = createRedisConnection(redisUrl()!, { name: 'test:lease-admin' });
    await vi.waitFor(() => expect(admin.status).toBe('ready'));
  });
  afterEach(async () => {
    await closeAll();
    // Entries written by hand stay until pruned: each test starts from an empty registry.
    await admin.del(`${prefix}replicas`);
  });
  afterAll(() => closeRedisConnection(admin));

  /** Redis's clock, in ms: the registry is timed by it. */
  async function redisNow(): Promise<number> {
    const [seconds, micros] = await admin.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  /** When a replica last proved its subscription: its registry entry's score, in Redis's clock. */
  async function proofOf(made: Replica): Promise<number> {
    const entries = await admin.zrange(`${prefix}replicas`, '0', '-1', 'WITHSCORES');
    for (let i = 0; i < entries.length; i += 2) if (entries[i]!.includes(`"replica":"${made.bus.replicaId}"`)) return Number(entries[i + 1]);
    return -1;
  }

  /** A registry entry as a replica writes it, with the given secret, lease and age. */
  async function register(replicaId: string, options: { secret?: RedisSigner; leaseMs?: number; ageMs?: number } = {}): Promise<void> {
    const member = (options.secret ?? signer).sign('revocation-replica', JSON.stringify({ replica: replicaId, leaseMs: options.leaseMs ?? 1_000 }));
    await admin.zadd(`${prefix}replicas`, (await redisNow()) - (options.ageMs ?? 0), member);
  }

  it('registers every replica once proven, and a barrier with no fault stays quick', async () => {
    const replicas = [0, 1, 2].map(() => replica(redisUrl()!, { prefix, signer }));
    await subscribed(...replicas);
    const result = await replicas[2]!.bus.announce(31);
    // Quick: no lease was waited for (lapsed 0). How quick is the benchmark's to say.
    expect(result).toMatchObject({ published: true, receivers: 3, acked: 3, missed: 0, registered: 3, lapsed: 0 });
    // Proven again and again, the lease never lapses while nothing is wrong: each replica's
    // proofs, read from the registry in Redis's clock, go on past the end of its first lease.
    const first = await Promise.all(replicas.map((made) => proofOf(made)));
    await until(async () => (await Promise.all(replicas.map((made) => proofOf(made)))).every((at, i) => at > first[i]! + DEFAULT_LEASE_MS), 'proofs past a lease');
    for (const made of replicas) expect(made.degraded).toEqual([true, false]);
  });

  it('a closed replica leaves the registry: the next barrier does not wait for it', async () => {
    const a = replica(redisUrl()!, { prefix, signer });
    const b = replica(redisUrl()!, { prefix, signer });
    await subscribed(a, b);
    // As RedisTier.close does: the bus, then its connections.
    await b.bus.close();
    await closeRedisConnection(b.subscriber);
    const result = await a.bus.announce(32);
    expect(result).toMatchObject({ receivers: 1, acked: 1, missed: 0, registered: 1, lapsed: 0 });
    expect(b.degraded.at(-1)).toBe(true);
  });

  it('trusts its cache only for the lease of its last proof: with no new proof it degrades by itself', async () => {
    // One proof at subscription, then none for a minute: the lease (300 ms) runs out first.
    const a = replica(redisUrl()!, { prefix, signer, leaseMs: 300, heartbeatMs: 60_000 });
    await subscribed(a);
    // Well before the next heartbeat (a minute away), so only the lease's own timer can have ended it.
    await vi.waitFor(() => expect(a.bus.degraded).toBe(true), { timeout: 15_000, interval: 5 });
    expect(a.degraded).toEqual([true, false, true]);
    expect(a.events).toContainEqual({ type: 'degraded', reason: 'lease_expired' });
  });

  const entries: Array<{ description: string; entry: Parameters<typeof register>[1]; waits: boolean }> = [
    { description: 'a registered replica that went silent a moment ago (crashed, or its subscription dropped)', entry: {}, waits: true },
    { description: 'an entry older than its lease and the slack (that replica stopped trusting long ago)', entry: { ageMs: 2_100 }, waits: false },
    { description: 'an entry not signed with the deployment secret (a forged one cannot slow revocations)', entry: { secret: new RedisSigner(randomBytes(32)) }, waits: false },
  ];
  it.each(entries)('$description: waited for until its lease lapsed = $waits', async ({ entry, waits }) => {
    const a = replica(redisUrl()!, { prefix, signer });
    await subscribed(a);
    const registeredAt = (await redisNow()) - (entry?.ageMs ?? 0);
    await register('silent-replica', entry);
    const result = await a.bus.announce(33);
    expect(result.missed).toBe(0);
    if (waits) {
      expect(result).toMatchObject({ receivers: 1, acked: 1, registered: 2, lapsed: 1 });
      // Answered only once the silent replica's lease (1 s) and the margin had passed, by Redis's clock.
      expect(await redisNow()).toBeGreaterThanOrEqual(registeredAt + 1_000 + LEASE_MARGIN_MS - 5);
      expect(a.events).toContainEqual({ type: 'barrier_lapsed', subject: 'key 33', lapsed: 1, replicas: ['silent-replica'] });
    } else {
      // Not waited for: nothing lapsed, nobody named.
      expect(result).toMatchObject({ receivers: 1, acked: 1, registered: 1, lapsed: 0 });
      expect(a.events.some((event) => event.type === 'barrier_lapsed')).toBe(false);
    }
  });

  it('a lease longer than the barrier bound cannot be waited out: that replica is counted as missed', async () => {
    const a = replica(redisUrl()!, { prefix, signer, timeoutMs: 400 });
    await subscribed(a);
    await register('silent-replica');
    const result = await a.bus.announce(34);
    expect(result).toMatchObject({ receivers: 1, acked: 1, registered: 2, lapsed: 0, missed: 1 });
  });

  it('when Redis drops a subscription before its replica notices, the barrier answers only after that replica stopped trusting its cache', async () => {
    const hasher = tinyHasher();
    const store = new KeyTable();
    const { key, row } = await store.add(hasher);
    const verifiers = [0, 1].map(() => new KeyVerifier({ store, hasher, stateTtlMs: 60 * 60_000 }));
    const [a, b] = verifiers.map((verifier) =>
      replica(redisUrl()!, { prefix, signer, evict: (keyId) => verifier.evict(keyId), setDegraded: (d) => verifier.setDegraded(d) }),
    ) as [Replica, Replica];
    await subscribed(a, b);
    await verifiers[1]!.verify(key);
    expect(verifiers[1]!.tryVerifyCached(key)).toBeDefined();

    // Redis forgets b's subscriptions without closing its connection: b hears nothing of it, and PUBLISH counts b out.
    const transitions = b.degraded.length;
    await b.subscriber.unsubscribe();
    store.rows.get(row.id)!.revokedAt = new Date(T0);
    const result = await a.bus.announce(row.id);
    expect(result).toMatchObject({ published: true, receivers: 1, acked: 1, missed: 0, registered: 2, lapsed: 1 });
    expect(b.evicted).toEqual([]);
    // By the time the barrier answers, b has stopped trusting its cache (it may be proven again since, with that cache cleared).
    expect(b.degraded.slice(transitions)).toContain(true);
    expect(verifiers[1]!.tryVerifyCached(key)).toBeUndefined();
    expect(await codeOf(() => verifiers[1]!.verify(key))).toBe('revoked_credential');
    // Its proofs no longer come back: b drops the connection, subscribes again, and is trusted again.
    expect(b.events).toContainEqual({ type: 'degraded', reason: 'heartbeat_failed' });
    await subscribed(b);
    expect(await a.bus.announce(35)).toMatchObject({ receivers: 2, acked: 2, missed: 0, lapsed: 0 });
    expect(b.evicted).toEqual([35]);
  });
});

describe.skipIf(!redisServerAvailable())('RevocationBus (private Redis, taken away and brought back)', () => {
  let server: PrivateRedis;
  const prefix = 'gatehouse:';
  const signer = new RedisSigner(randomBytes(32));

  beforeAll(async () => {
    server = await privateRedis();
    await server.start();
  });
  afterEach(closeAll);
  afterAll(() => server.kill());

  it('degrades when Redis dies, recovers when it returns, and publishes a change it could not announce', async () => {
    const a = replica(server.url, { prefix, signer, timeoutMs: 300 });
    const b = replica(server.url, { prefix, signer, timeoutMs: 300 });
    await subscribed(a, b);

    await server.kill();
    await vi.waitFor(() => expect([a.bus.degraded, b.bus.degraded]).toEqual([true, true]));
    const result = await a.bus.announce(21);
    expect(result.published).toBe(false);

    await server.start();
    await subscribed(a, b);
    // Published again once a's connection is back: a replica that stayed subscribed meanwhile still hears of it.
    await vi.waitFor(() => expect(a.events).toContainEqual({ type: 'republished', subject: 'key 21' }), { timeout: 5_000 });
    expect((await a.bus.announce(22)).missed).toBe(0);
    expect(b.evicted).toContain(22);
  });

  it('notices a connection that stops answering (no close) through its heartbeat, well within the barrier bound', async () => {
    const a = replica(server.url, { prefix, signer, heartbeatMs: 100 });
    await subscribed(a);
    const admin = createRedisConnection(server.url, { name: 'test:pauser' });
    try {
      await vi.waitFor(() => expect(admin.status).toBe('ready'));
      // Every client's commands hang, as over a partition: a PING sent meanwhile goes unanswered
      // for longer than the heartbeat allows it; no closed connection tells the replica.
      await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
      await vi.waitFor(() => expect(a.bus.degraded).toBe(true), { timeout: 15_000, interval: 20 });
      expect(a.events).toContainEqual({ type: 'degraded', reason: 'heartbeat_failed' });
      await subscribed(a);
    } finally {
      admin.disconnect();
    }
  });
});
