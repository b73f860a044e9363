import { until } from '../support/until.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli-process.ts';
import { ADMIN_EMAIL, ADMIN_PASSWORD, type GatewayProcess } from '../support/gateway-process.ts';
import { loginAdmin, request, type JsonResponse } from '../support/http.ts';
import { metric, startRelayedReplicas, waitForRedis, type RelayedReplicas } from '../support/replicas.ts';
import { postgresUrl, redisUrl } from '../support/services.ts';
import { type TcpProxy } from '../support/tcp-proxy.ts';

/** Rounds of each way a session ends over HTTP: each with fresh sessions, warmed on every replica. */
const ROUNDS = 2;
/** Calls with the ended token fired on every replica the moment the answer (or the CLI's exit) arrives. */
const BURST = 8;
/** Calls of the running traffic sent after a change's answer, besides the burst, before the traffic stops. */
const TRAFFIC_AFTER = 10;
/** An admin route: the token is checked as on every admin endpoint, and nothing changes. */
const ADMIN_PATH = '/api/v1/api-keys';
const SESSIONS_PATH = '/api/v1/auth/sessions';

interface Use {
  status: number;
  code: string | undefined;
}

/** The session id (`jti`) a token carries. */
function sessionIdOf(token: string): string {
  const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { jti: string };
  return payload.jti;
}

/**
 * The contract of issue 25: an ended admin session's token is refused with `401
 * revoked_credential` on every replica before the answer that ended it leaves, through the
 * revocation barrier, for each way a session ends (logout, DELETE of a session, a password
 * change for the admin's other sessions, `gatehouse admin reset-password`). Three replicas on
 * one PostgreSQL and one Redis; replica 0 reaches Redis through a relay the last test cuts.
 * Every round: fresh sessions, each token used twice on every replica (its verification then in
 * each replica's memory); traffic with the token to be ended on replicas 1 and 2 while replica 0
 * (or the CLI) ends it; from the moment the answer arrives, a burst on every replica and the
 * traffic going on. A call sent after the answer that is accepted is a stale acceptance, and
 * there must be none.
 */
describe.skipIf(postgresUrl() === null || redisUrl() === null)('admin sessions on three replicas: an ended session is refused everywhere once answered', () => {
  let set: RelayedReplicas | undefined;
  let relay: TcpProxy;
  let replicas: GatewayProcess[];
  let password = ADMIN_PASSWORD;
  let changes = 0;
  const stale: string[] = [];
  const counts: string[] = [];

  beforeAll(async () => {
    set = await startRelayedReplicas();
    ({ relay, replicas } = set);
  }, 120_000);
  afterAll(async () => {
    if (counts.length > 0) console.info(counts.join('\n'));
    await set?.close();
  });

  const countAccepted = (prefix: string) => stale.filter((entry) => entry.startsWith(prefix)).length;
  /** A fresh session, logged in on `on`. */
  const login = (on = replicas[0]!) => loginAdmin(on.url, ADMIN_EMAIL, password);
  const use = async (replica: GatewayProcess, token: string): Promise<Use> => {
    const response = await request(`${replica.url}${ADMIN_PATH}`, { token });
    return { status: response.status, code: response.body?.code };
  };

  /** Every replica accepts the token twice: its verification is then in each replica's memory. */
  async function warm(...tokens: string[]): Promise<void> {
    for (const token of tokens) {
      for (let pass = 0; pass < 2; pass++) {
        const uses = await Promise.all(replicas.map((replica) => use(replica, token)));
        expect(uses.map((one) => one.status)).toEqual([200, 200, 200]);
      }
    }
  }

  /**
   * Traffic with `token` on replicas 1 and 2 from before `end` until a while after its answer,
   * and a burst on all three the moment the answer arrives. Resolves with the answer and the
   * calls sent after it.
   */
  async function race<T>(token: string, end: () => Promise<T>): Promise<{ answer: T; after: Use[]; before: number }> {
    let answered = false;
    let running = true;
    let before = 0;
    const after: Use[] = [];
    const traffic = [replicas[1]!, replicas[2]!].map(async (replica) => {
      while (running) {
        // Counted when sent: "after" only if the answer had arrived by then.
        const sentAfter = answered;
        const one = await use(replica, token);
        if (sentAfter) after.push(one);
        else before++;
      }
    });
    // The traffic under way before the session is ended: a call of it answered.
    await until(() => before > 0, 'traffic before the change');
    const answer = await end();
    answered = true;
    const trafficBefore = after.length;
    after.push(...(await Promise.all(replicas.flatMap((replica) => Array.from({ length: BURST }, () => use(replica, token))))));
    // And going on after it: calls of the running traffic, sent after the answer, answered too.
    await until(() => after.length >= trafficBefore + BURST * replicas.length + TRAFFIC_AFTER, 'traffic after the change');
    running = false;
    await Promise.all(traffic);
    return { answer, after, before };
  }

  /** Records the calls after the answer that were accepted, and those refused otherwise than 401 revoked_credential. */
  function check(label: string, after: Use[]): string[] {
    const unexpected: string[] = [];
    for (const one of after) {
      if (one.status === 200) stale.push(`${label}: accepted after the answer`);
      else if (one.status !== 401 || one.code !== 'revoked_credential') unexpected.push(`${label}: ${one.status} ${one.code}`);
    }
    return unexpected;
  }

  /** A token whose session must be unaffected: still accepted on every replica. */
  async function stillWorks(token: string): Promise<void> {
    expect((await Promise.all(replicas.map((replica) => use(replica, token)))).map((one) => one.status)).toEqual([200, 200, 200]);
  }

  interface Way {
    kind: string;
    /** Sessions opened for the round: `ended` is the one raced; `caller`, if any, ends it. */
    end(tokens: { ended: string; caller: string }): Promise<JsonResponse>;
    /** Whether the caller's own session survives the end. */
    callerSurvives: boolean;
  }

  const ways: Way[] = [
    {
      kind: 'logout',
      end: ({ ended }) => request(`${replicas[0]!.url}/api/v1/auth/logout`, { method: 'POST', token: ended }),
      callerSurvives: true,
    },
    {
      kind: 'DELETE of another session',
      end: ({ ended, caller }) => request(`${replicas[0]!.url}${SESSIONS_PATH}/${sessionIdOf(ended)}`, { method: 'DELETE', token: caller }),
      callerSurvives: true,
    },
    {
      kind: 'password change (the other sessions)',
      end: async ({ caller }) => {
        const next = `changed password ${++changes}`;
        const answer = await request(`${replicas[0]!.url}/api/v1/auth/password`, { method: 'POST', token: caller, json: { current_password: password, new_password: next } });
        if (answer.status === 204) password = next;
        return answer;
      },
      callerSurvives: true,
    },
  ];

  for (const way of ways) {
    it(`${way.kind}: ${ROUNDS} rounds, no call sent after the answer is accepted on any replica`, async () => {
      let sentAfter = 0;
      let sentBefore = 0;
      const unexpected: string[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const label = `${way.kind} ${round}`;
        const caller = await login(replicas[round % 3]!);
        const ended = await login(replicas[(round + 1) % 3]!);
        await warm(ended, caller);
        const { answer, after, before } = await race(ended, () => way.end({ ended, caller }));
        expect(answer.status, answer.text).toBe(204);
        sentAfter += after.length;
        sentBefore += before;
        unexpected.push(...check(label, after));
        if (way.callerSurvives) await stillWorks(caller);
        // The ended session is no longer listed; the caller's is.
        const listed = await request(`${replicas[1]!.url}${SESSIONS_PATH}`, { token: caller });
        expect(listed.status, listed.text).toBe(200);
        const ids = (listed.body as Array<{ id: string }>).map((session) => session.id);
        expect(ids).toContain(sessionIdOf(caller));
        expect(ids).not.toContain(sessionIdOf(ended));
      }
      expect(stale.filter((entry) => entry.startsWith(way.kind))).toEqual([]);
      expect(unexpected).toEqual([]);
      expect(sentAfter).toBeGreaterThanOrEqual(ROUNDS * 3 * BURST);
      counts.push(`admin sessions, ${way.kind}: ${ROUNDS} rounds, ${sentBefore} calls before the answer, ${sentAfter} after it, ${countAccepted(way.kind)} of those accepted`);
    });
  }

  it('gatehouse admin reset-password: every session of the admin refused on every replica once the command exits', async () => {
    const tokens = [await login(replicas[0]!), await login(replicas[1]!), await login(replicas[2]!)];
    await warm(...tokens);
    const next = `reset password ${++changes}`;
    const cliEnv = { DATABASE_URL: set!.database.url, REDIS_URL: redisUrl()! };
    const unexpected: string[] = [];
    // Every live session of the admin: these three, and the last password change's caller.
    const live = await request(`${replicas[0]!.url}${SESSIONS_PATH}`, { token: tokens[0]! });
    expect((live.body as Array<{ id: string }>).map((session) => session.id)).toEqual(expect.arrayContaining(tokens.map(sessionIdOf)));
    const { answer, after, before } = await race(tokens[0]!, () => runCli(['admin', 'reset-password', '--email', ADMIN_EMAIL, '--json'], cliEnv, `${next}\n`));
    expect(answer.code, answer.stderr).toBe(0);
    password = next;
    expect(answer.json()).toMatchObject({ email: ADMIN_EMAIL, sessions_ended: (live.body as unknown[]).length });
    unexpected.push(...check('reset-password', after));
    // The other two sessions as well, on every replica, the moment the command has exited.
    const others = await Promise.all(replicas.flatMap((replica) => tokens.slice(1).flatMap((token) => Array.from({ length: BURST / 2 }, () => use(replica, token)))));
    unexpected.push(...check('reset-password (other sessions)', others));
    expect(stale.filter((entry) => entry.startsWith('reset-password'))).toEqual([]);
    expect(unexpected).toEqual([]);
    expect(after.length).toBeGreaterThanOrEqual(3 * BURST);
    // The new password logs in.
    await stillWorks(await login(replicas[2]!));
    counts.push(`admin sessions, reset-password: ${before} calls before the exit, ${after.length + others.length} after it, ${countAccepted('reset-password')} of those accepted`);
  });

  it('no stale acceptance, no barrier missed, nothing failed open', async () => {
    expect(stale).toEqual([]);
    for (const replica of replicas) {
      expect(await metric(replica, 'gatehouse_revocation_barrier_missed_replicas_total')).toBe(0);
      expect(await metric(replica, 'gatehouse_fail_open_decisions_total')).toBe(0);
    }
  });

  /**
   * The fault rules of a key's revocation, for a logout: replica 0 loses Redis while replicas 1
   * and 2 keep it, and the token's verification in memory. The end is stored, refused on
   * replica 0 (ended in its memory; degraded, it reads the store too) and answered 503: not
   * confirmed. The admin retries, and a load balancer sends the retry to replica 1: the session
   * is already ended in the store, yet the answer must confirm it on every replica.
   */
  it('Redis unreachable from the replica logging out: stored, refused there, 503; a retry on another replica confirms it everywhere', async () => {
    const [changer, b, c] = replicas as [GatewayProcess, GatewayProcess, GatewayProcess];
    const token = await login(b);
    const witness = await login(c);
    await warm(token, witness);
    await relay.cut();
    try {
      await waitForRedis([changer], 'degraded');
      await waitForRedis([b, c], 'ok');
      const loggedOut = await request(`${changer.url}/api/v1/auth/logout`, { method: 'POST', token });
      expect([loggedOut.status, loggedOut.body?.code]).toEqual([503, 'store_unavailable']);
      // Stored: no longer listed. Refused by the replica that ended it.
      const listed = await request(`${b.url}${SESSIONS_PATH}`, { token: witness });
      expect((listed.body as Array<{ id: string }>).map((session) => session.id)).not.toContain(sessionIdOf(token));
      expect(await use(changer, token)).toEqual({ status: 401, code: 'revoked_credential' });

      const retried = await request(`${b.url}/api/v1/auth/logout`, { method: 'POST', token });
      expect(retried.status, retried.text).toBe(204);
      const after = await Promise.all(replicas.flatMap((replica) => Array.from({ length: BURST }, () => use(replica, token))));
      const unexpected = check('partition retry', after);
      expect(unexpected).toEqual([]);
      expect(stale.filter((entry) => entry.startsWith('partition'))).toEqual([]);
      counts.push(`admin sessions, Redis cut on replica 0: 503 on replica 0, retry 204 on replica 1, ${after.length} calls after it, ${countAccepted('partition')} accepted`);
    } finally {
      await relay.restore();
    }
    await waitForRedis(replicas, 'ok');
    expect(await Promise.all(replicas.map((replica) => use(replica, token)))).toEqual(replicas.map(() => ({ status: 401, code: 'revoked_credential' })));
    await stillWorks(witness);
  });
});
