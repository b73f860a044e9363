import { until } from '../support/until.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request, type JsonResponse } from '../support/http.ts';
import { type Origin } from '../support/origin.ts';
import { EVENTS_PATH, metric, startRelayedReplicas, waitForRedis, type RelayedReplicas } from '../support/replicas.ts';
import { postgresUrl, redisUrl } from '../support/services.ts';
import { type TcpProxy } from '../support/tcp-proxy.ts';

/** Rounds of each kind of change: each a fresh key, cached on every replica, then narrowed. */
const ROUNDS = 4;
/** Calls with the key fired on every replica the moment the change's answer arrives. */
const BURST = 8;
/** How long the traffic on the other replicas goes on after the answer. */
/** Calls of the running traffic sent after a change's answer, besides the burst, before the traffic stops. */
const TRAFFIC_AFTER = 10;

interface Use {
  status: number;
  code: string | undefined;
}

/** A call of the expiry test, with when it was sent (Date.now()). */
interface TimedUse extends Use {
  sentAt: number;
}

interface Narrowing {
  kind: string;
  /** The create body's fields, besides the name. */
  create: Record<string, unknown>;
  /** The change, sent to replica 0; resolves with its answer (checked by the caller). */
  change(id: number): Promise<JsonResponse>;
  /** The refusal of a call on agent 1's event route once the change holds. */
  expected: { status: number; code: string };
}

/**
 * The contract of issue 24: a change that narrows what a key may do is in force on every
 * replica before its answer leaves, exactly as DELETE (test/e2e/replicas.test.ts). Three
 * replicas on one PostgreSQL and one Redis; replica 0 reaches Redis through a relay the last
 * test cuts. Every round: a fresh key, cached on all three; traffic with it on replicas 1 and 2
 * while replica 0 is sent the change; from the moment the answer arrives, a burst of calls on
 * every replica and the traffic going on. A call sent after the answer that the upstream
 * receives is a stale acceptance, and there must be none.
 */
describe.skipIf(postgresUrl() === null || redisUrl() === null)('key lifecycle on three replicas: a narrowing change holds everywhere once answered', () => {
  let set: RelayedReplicas | undefined;
  let origin: Origin;
  let relay: TcpProxy;
  let replicas: GatewayProcess[];
  let admin: string;
  const stale: string[] = [];

  beforeAll(async () => {
    set = await startRelayedReplicas();
    ({ origin, relay, replicas } = set);
    admin = await loginAdmin(replicas[0]!.url);
  }, 120_000);
  afterAll(async () => {
    await set?.close();
  });

  const patch = (id: number, json: Record<string, unknown>, on = replicas[0]!) =>
    request(`${on.url}/api/v1/api-keys/${id}`, { method: 'PATCH', token: admin, json });
  const rotate = (id: number, graceSeconds: number, on = replicas[0]!) =>
    request(`${on.url}/api/v1/api-keys/${id}/rotate`, { method: 'POST', token: admin, json: { grace_seconds: graceSeconds } });
  const create = async (name: string, fields: Record<string, unknown>, on: GatewayProcess) => {
    const response = await createKey(on.url, admin, { name, ...fields });
    expect(response.status, response.text).toBe(201);
    return { key: response.body.key as string, id: response.body.id as number };
  };
  /** One call with `key`; `tag` goes in the body, for finding it at the upstream. */
  const use = async (replica: GatewayProcess, key: string, tag: string, path = EVENTS_PATH): Promise<Use> => {
    const response = await request(`${replica.url}${path}`, { method: 'POST', token: key, json: { type: 'lifecycle', tag } });
    return { status: response.status, code: response.body?.code };
  };
  /** What the upstream received of the calls tagged `tag`. */
  const arrived = (tag: string) => origin.received.filter((received) => received.body.includes(`"tag":"${tag}"`)).length;

  /** Every replica accepts the key twice: its state is then in each replica's cache. */
  async function warm(key: string, path = EVENTS_PATH): Promise<void> {
    for (let pass = 0; pass < 2; pass++) {
      const uses = await Promise.all(replicas.map((replica) => use(replica, key, 'warm', path)));
      expect(uses.map((one) => one.status)).toEqual([200, 200, 200]);
    }
  }

  /**
   * Traffic with `key` on replicas 1 and 2 from before `change` until a while after its
   * answer, and a burst on all three the moment the answer arrives. Resolves with the answer,
   * the calls sent after it, and how many of those the upstream received.
   */
  async function race(label: string, key: string, path: string, change: () => Promise<JsonResponse>) {
    const afterTag = `after:${label}`;
    let answered = false;
    let running = true;
    const after: Use[] = [];
    let before = 0;
    const traffic = [replicas[1]!, replicas[2]!].map(async (replica) => {
      while (running) {
        // Tagged when sent: "after" only if the answer had arrived by then.
        const sentAfter = answered;
        const one = await use(replica, key, sentAfter ? afterTag : `before:${label}`, path);
        if (sentAfter) after.push(one);
        else before++;
      }
    });
    // The traffic under way before the change is sent: a call of it answered.
    await until(() => before > 0, 'traffic before the change');
    const answer = await change();
    answered = true;
    const trafficBefore = after.length;
    after.push(...(await Promise.all(replicas.flatMap((replica) => Array.from({ length: BURST }, () => use(replica, key, afterTag, path))))));
    // And going on after it: calls of the running traffic, sent after the answer, answered too.
    await until(() => after.length >= trafficBefore + BURST * replicas.length + TRAFFIC_AFTER, 'traffic after the change');
    running = false;
    await Promise.all(traffic);
    return { answer, after, received: arrived(afterTag) };
  }

  const narrowings: Narrowing[] = [
    {
      kind: 'scope removed',
      create: { scopes: ['events:write', 'mcp:calls'] },
      change: (id) => patch(id, { scopes: ['mcp:calls'] }),
      expected: { status: 403, code: 'insufficient_scope' },
    },
    {
      kind: 'agent binding set',
      create: { scopes: ['events:write'] },
      // The calls go to agent 1's route.
      change: (id) => patch(id, { agent_id: 2 }),
      expected: { status: 403, code: 'agent_mismatch' },
    },
    {
      kind: 'disabled',
      create: { scopes: ['events:write'] },
      change: (id) => patch(id, { enabled: false }),
      expected: { status: 401, code: 'disabled_credential' },
    },
    {
      // Every replica holds slots leased under the old limit: none is used once the answer is out.
      kind: 'rate limit lowered',
      create: { scopes: ['events:write'], rate_limit: { requests: 100_000, per_seconds: 60 } },
      change: (id) => patch(id, { rate_limit: { requests: 1, per_seconds: 60 } }),
      expected: { status: 429, code: 'rate_limited' },
    },
    {
      kind: 'rotated with grace 0',
      create: { scopes: ['events:write'] },
      change: (id) => rotate(id, 0),
      expected: { status: 401, code: 'revoked_credential' },
    },
  ];

  for (const narrowing of narrowings) {
    it(`${narrowing.kind}: ${ROUNDS} rounds, no call sent after the answer is accepted on any replica`, async () => {
      const path = EVENTS_PATH;
      let sentAfter = 0;
      const unexpected: string[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const label = `${narrowing.kind} ${round}`;
        const { key, id } = await create(label, narrowing.create, replicas[round % 3]!);
        await warm(key, path);
        const { answer, after, received } = await race(label, key, path, () => narrowing.change(id));
        expect(answer.status, answer.text).toBe(narrowing.kind.startsWith('rotated') ? 201 : 200);
        sentAfter += after.length;
        if (received > 0) stale.push(`${label}: ${received} calls sent after the answer reached the upstream`);
        for (const one of after) {
          if (one.status === 200) stale.push(`${label}: accepted after the answer`);
          else if (one.status !== narrowing.expected.status || one.code !== narrowing.expected.code) unexpected.push(`${label}: ${one.status} ${one.code}`);
        }
        if (narrowing.kind.startsWith('rotated')) {
          // The successor works everywhere at once.
          const successor = answer.body.key as string;
          expect((await Promise.all(replicas.map((replica) => use(replica, successor, 'successor', path)))).map((one) => one.status)).toEqual([200, 200, 200]);
        }
      }
      expect(stale.filter((entry) => entry.startsWith(narrowing.kind))).toEqual([]);
      expect(unexpected).toEqual([]);
      expect(sentAfter).toBeGreaterThanOrEqual(ROUNDS * 3 * BURST);
      console.info(`key lifecycle, ${narrowing.kind}: ${ROUNDS} rounds, ${sentAfter} calls sent after the answer, 0 accepted`);
    });
  }

  /**
   * An expiry brought forward (to a second from now: a PATCH may not set one in the past), or
   * set by a rotation's grace period: every replica must hold the new expiry, so no call sent
   * after it passes is accepted (a replica still holding the old state would accept them all).
   */
  async function expiryHolds(label: string, key: string, expiresAt: Date): Promise<{ before: TimedUse[]; after: Use[]; received: number }> {
    const afterTag = `after:${label}`;
    const before: TimedUse[] = [];
    const after: Use[] = [];
    const deadline = expiresAt.getTime() + 300;
    const traffic = replicas.map(async (replica) => {
      while (Date.now() < deadline) {
        const sentAt = Date.now();
        const sentAfter = sentAt > expiresAt.getTime();
        const one = await use(replica, key, sentAfter ? afterTag : `before:${label}`);
        if (sentAfter) after.push(one);
        else before.push({ ...one, sentAt });
      }
    });
    // The replicas read the wall clock: the burst goes once it has passed the expiry.
    await until(() => Date.now() > expiresAt.getTime(), 'the expiry to pass');
    after.push(...(await Promise.all(replicas.flatMap((replica) => Array.from({ length: BURST }, () => use(replica, key, afterTag))))));
    await Promise.all(traffic);
    return { before, after, received: arrived(afterTag) };
  }

  it('expiry brought forward, and a rotation\'s grace period: no call sent after the new expiry is accepted on any replica', async () => {
    const outcomes: string[] = [];
    for (let round = 0; round < 2; round++) {
      const label = `expiry ${round}`;
      const { key, id } = await create(label, { scopes: ['events:write'], expires_at: new Date(Date.now() + 3_600_000).toISOString() }, replicas[round]!);
      await warm(key);
      const expiresAt = new Date(Date.now() + 1_000);
      const changed = await patch(id, { expires_at: expiresAt.toISOString() });
      expect(changed.status, changed.text).toBe(200);
      expect(changed.body.expires_at).toBe(expiresAt.toISOString());
      const { before, after, received } = await expiryHolds(label, key, expiresAt);
      outcomes.push(...checkExpiry(label, before, after, received, expiresAt));
    }
    {
      const label = 'grace 1';
      const { key, id } = await create(label, { scopes: ['events:write'] }, replicas[2]!);
      await warm(key);
      const rotated = await rotate(id, 1);
      expect(rotated.status, rotated.text).toBe(201);
      const old = await request(`${replicas[0]!.url}/api/v1/api-keys/${id}`, { token: admin });
      expect(old.body).toMatchObject({ rotated_to: rotated.body.id, status: 'active' });
      const expiresAt = new Date(old.body.expires_at as string);
      const { before, after, received } = await expiryHolds(label, key, expiresAt);
      outcomes.push(...checkExpiry(label, before, after, received, expiresAt));
    }
    expect(stale.filter((entry) => entry.startsWith('expiry') || entry.startsWith('grace'))).toEqual([]);
    expect(outcomes).toEqual([]);
  });

  function checkExpiry(label: string, before: TimedUse[], after: Use[], received: number, expiresAt: Date): string[] {
    const outcomes: string[] = [];
    if (received > 0) stale.push(`${label}: ${received} calls sent after the expiry reached the upstream`);
    // Until shortly before the new expiry the key still works: the change narrowed it, it did not end it.
    const early = before.filter((one) => one.sentAt < expiresAt.getTime() - 100);
    if (early.length === 0 || early.some((one) => one.status !== 200)) outcomes.push(`${label}: before the expiry ${early.map((one) => one.status).join(',')}`);
    for (const one of after) {
      if (one.status === 200) stale.push(`${label}: accepted after the expiry`);
      else if (one.code !== 'expired_credential') outcomes.push(`${label}: ${one.status} ${one.code}`);
    }
    if (after.length < 3 * BURST) outcomes.push(`${label}: only ${after.length} calls after the expiry`);
    return outcomes;
  }

  it('no stale acceptance in any round, no barrier missed, nothing failed open', async () => {
    expect(stale).toEqual([]);
    for (const replica of replicas) {
      expect(await metric(replica, 'gatehouse_revocation_barrier_missed_replicas_total')).toBe(0);
      expect(await metric(replica, 'gatehouse_fail_open_decisions_total')).toBe(0);
    }
  });

  /**
   * The fault rules of DELETE (test/e2e/faults-redis.test.ts), for a PATCH: replica 0 loses
   * Redis while replicas 1 and 2 keep it, and the key's cached state. The disable is stored, in
   * force on replica 0 (degraded, it reads the store), and answered 503: not confirmed. The
   * admin retries, and a load balancer sends the retry to replica 1: the stored row no longer
   * changes, yet the answer must confirm the change on every replica, as a retried DELETE does.
   */
  it('Redis unreachable from the changing replica: stored, refused there, 503; a retry on another replica confirms it everywhere', async () => {
    const [changer, b, c] = replicas as [GatewayProcess, GatewayProcess, GatewayProcess];
    const { key, id } = await create('partition', { scopes: ['events:write'] }, b);
    await warm(key);
    await relay.cut();
    try {
      await waitForRedis([changer], 'degraded');
      await waitForRedis([b, c], 'ok');
      const disabled = await patch(id, { enabled: false }, changer);
      expect([disabled.status, disabled.body.code]).toEqual([503, 'store_unavailable']);
      // Stored, and refused by the replica that reads the store.
      expect((await request(`${b.url}/api/v1/api-keys/${id}`, { token: admin })).body).toMatchObject({ enabled: false, status: 'disabled' });
      expect(await use(changer, key, 'partition:degraded')).toEqual({ status: 401, code: 'disabled_credential' });

      const retried = await patch(id, { enabled: false }, b);
      expect(retried.status, retried.text).toBe(200);
      expect(retried.body).toMatchObject({ enabled: false, status: 'disabled' });
      const afterTag = 'after:partition retry';
      const after = await Promise.all(replicas.flatMap((replica) => Array.from({ length: BURST }, () => use(replica, key, afterTag))));
      const accepted = after.filter((one) => one.status === 200).length;
      if (accepted > 0) stale.push(`partition: ${accepted} calls accepted after the retry's 200`);
      expect(arrived(afterTag)).toBe(0);
      expect(new Set(after.map((one) => `${one.status} ${one.code}`))).toEqual(new Set(['401 disabled_credential']));
    } finally {
      await relay.restore();
    }
    await waitForRedis(replicas, 'ok');
    expect(await Promise.all(replicas.map((replica) => use(replica, key, 'after:partition healed')))).toEqual(
      replicas.map(() => ({ status: 401, code: 'disabled_credential' })),
    );
    expect(arrived('after:partition healed')).toBe(0);
  });
});
