import type { EndedSessions } from '../admin/ended-sessions.ts';
import type { SessionEndListener } from '../admin/session-service.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { BarrierResult } from './revocation-bus.ts';

/**
 * What SessionService calls once a session's end is stored, before it answers: ended here,
 * then (with Redis) the same barrier as a key's revocation, with the same fault rule: an end
 * that could not be published is stored but unconfirmed, `503`, and repeating the request
 * announces it again (SessionService re-announces the ends it finds already stored) — and a
 * gateway on PostgreSQL re-reads the ended sessions within `KEY_CACHE_TTL` whatever happens
 * (src/app.ts, `refreshEndedSessions`). `closeStreams`: the streams opened with the session's
 * tokens end with it.
 */
export function createSessionEndListener(deps: {
  ended?: EndedSessions;
  closeStreams?(sessionId: string): void;
  bus?: { announceSessionEnd(sessionId: string): Promise<BarrierResult> };
  observe?(result: BarrierResult): void;
}): SessionEndListener {
  return {
    async sessionsEnded(sessions) {
      for (const session of sessions) {
        deps.ended?.end(session.id, session.expiresAt);
        deps.closeStreams?.(session.id);
      }
      if (deps.bus === undefined) return;
      // In parallel: each barrier waits up to its bound, and an admin may have many sessions.
      const results = await Promise.all(sessions.map((session) => deps.bus!.announceSessionEnd(session.id)));
      for (const result of results) deps.observe?.(result);
      const unpublished = results.some((result) => !result.published);
      if (unpublished) {
        throw new GatewayError(
          'store_unavailable',
          'The session end is stored, but Redis cannot be reached to confirm that every replica has applied it; retry the request (the other replicas refuse its token within KEY_CACHE_TTL meanwhile)',
        );
      }
    },
  };
}
