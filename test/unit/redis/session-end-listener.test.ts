import { describe, expect, it } from 'vitest';
import { EndedSessions } from '../../../src/admin/ended-sessions.ts';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import type { AdminPrincipal } from '../../../src/policy/principal.ts';
import type { BarrierResult } from '../../../src/redis/revocation-bus.ts';
import { createSessionEndListener } from '../../../src/redis/session-end-listener.ts';

const NOW = Date.parse('2030-06-01T12:00:00.000Z');
const EXPIRES = new Date(NOW + 60_000);

const barrier = (fields: Partial<BarrierResult> = {}): BarrierResult => ({
  published: true,
  receivers: 3,
  acked: 3,
  missed: 0,
  registered: 3,
  lapsed: 0,
  durationMs: 4,
  ...fields,
});

const principal = (sessionId: string): AdminPrincipal => ({ kind: 'admin', adminId: 1, expiresAt: EXPIRES, sessionId, revoked: false });

/** The ended sessions, and a log of the steps in order: `end <id>` when a session is refused here, `announce <id>` when published. */
function setup(answer: (sessionId: string) => BarrierResult = () => barrier()) {
  const steps: string[] = [];
  const ended = new EndedSessions({ now: () => NOW, tokenTtlMs: 60_000 });
  const tracked = {
    end: (id: string, expiresAt?: Date) => {
      steps.push(`end ${id}`);
      ended.end(id, expiresAt);
    },
  } as unknown as EndedSessions;
  const observed: BarrierResult[] = [];
  const bus = {
    announceSessionEnd: async (sessionId: string) => {
      // Ended here before anything is published: this replica refuses the token while the barrier runs.
      steps.push(`announce ${sessionId} (ended here: ${ended.apply(principal(sessionId)).revoked})`);
      return answer(sessionId);
    },
  };
  return { steps, ended, observed, bus, listener: createSessionEndListener({ ended: tracked, bus, observe: (result) => observed.push(result) }) };
}

const sessions = (...ids: string[]) => ids.map((id) => ({ id, expiresAt: EXPIRES }));

describe('createSessionEndListener', () => {
  it('without Redis: ended in memory, and done', async () => {
    const ended = new EndedSessions({ now: () => NOW, tokenTtlMs: 60_000 });
    await createSessionEndListener({ ended }).sessionsEnded(sessions('a', 'b'));
    expect(ended.apply(principal('a')).revoked).toBe(true);
    expect(ended.apply(principal('b')).revoked).toBe(true);
    expect(ended.apply(principal('c')).revoked).toBe(false);
  });

  it('ends every session here first, then announces each through the barrier, and answers once all are confirmed', async () => {
    const { steps, observed, listener } = setup();
    await expect(listener.sessionsEnded(sessions('a', 'b'))).resolves.toBeUndefined();
    expect(steps).toEqual(['end a', 'end b', 'announce a (ended here: true)', 'announce b (ended here: true)']);
    expect(observed).toEqual([barrier(), barrier()]);
  });

  it('nothing ended: nothing announced', async () => {
    const { steps, listener } = setup();
    await listener.sessionsEnded([]);
    expect(steps).toEqual([]);
  });

  it('answers when a replica missed the barrier (logged and counted by the barrier)', async () => {
    const { observed, listener } = setup(() => barrier({ acked: 2, missed: 1, durationMs: 2_000 }));
    await expect(listener.sessionsEnded(sessions('a'))).resolves.toBeUndefined();
    expect(observed[0]!.missed).toBe(1);
  });

  it('503 store_unavailable when the end could not be published: still ended here', async () => {
    const { ended, listener } = setup(() => barrier({ published: false, receivers: 0, acked: 0, registered: 0 }));
    const error = await listener.sessionsEnded(sessions('a')).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(GatewayError);
    expect((error as GatewayError).code).toBe('store_unavailable');
    expect((error as GatewayError).status).toBe(503);
    expect(ended.apply(principal('a')).revoked).toBe(true);
  });

  it('one session of several unpublished: every one is still announced, then 503', async () => {
    const { steps, observed, listener } = setup((id) => barrier(id === 'b' ? { published: false, receivers: 0, acked: 0 } : {}));
    const error = await listener.sessionsEnded(sessions('a', 'b', 'c')).catch((caught: unknown) => caught);
    expect((error as GatewayError).code).toBe('store_unavailable');
    expect(steps.filter((step) => step.startsWith('announce')).map((step) => step.split(' ')[1])).toEqual(['a', 'b', 'c']);
    expect(observed.map((result) => result.published)).toEqual([true, false, true]);
  });

  it('the CLI (no memory of its own): announced only', async () => {
    const announced: string[] = [];
    const listener = createSessionEndListener({ bus: { announceSessionEnd: async (id) => (announced.push(id), barrier()) } });
    await listener.sessionsEnded(sessions('a'));
    expect(announced).toEqual(['a']);
  });
});
