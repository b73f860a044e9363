import type { EndedSessions } from '../admin/ended-sessions.ts';
import type { SessionEndListener } from '../admin/session-service.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { BarrierResult } from './revocation-bus.ts';

/**
 * What SessionService calls once a session's end is stored, before it answers: ended here,
 * then (with Redis) the same barrier as a key's revocation, with the same fault rule: an end
 * that could not be published is stored but unconfirmed, `503`, and repeating it announces it
 * again (src/redis/key-state-listener.ts).
 */
export function createSessionEndListener(deps: {
  ended?: EndedSessions;
  bus?: { announceSessionEnd(sessionId: string): Promise<BarrierResult> };
  observe?(result: BarrierResult): void;
}): SessionEndListener {
  return {
    async sessionsEnded(sessions) {
      for (const session of sessions) deps.ended?.end(session.id, session.expiresAt);
      if (deps.bus === undefined) return;
      let unpublished = false;
      for (const session of sessions) {
        const result = await deps.bus.announceSessionEnd(session.id);
        deps.observe?.(result);
        unpublished ||= !result.published;
      }
      if (unpublished) {
        throw new GatewayError('store_unavailable', 'The session end is stored, but Redis cannot be reached to confirm that every replica has applied it; retry the request');
      }
    },
  };
}
