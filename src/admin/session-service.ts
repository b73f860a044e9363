import { GatewayError } from '../errors/gateway-error.ts';
import type { Actor } from '../keys/key-service.ts';
import type { AdminPrincipal } from '../policy/principal.ts';
import type { AdminSessionRow, AuditOf, Store } from '../store/store.ts';
import type { IssuedSession, SessionTokens } from './sessions.ts';

/** Told of sessions whose end is stored: every replica refuses their tokens before it resolves. */
export interface SessionEndListener {
  sessionsEnded(sessions: ReadonlyArray<{ id: string; expiresAt: Date }>): Promise<void>;
}

type SessionStore = Pick<Store, 'createAdminSession' | 'listAdminSessions' | 'endAdminSessions' | 'findAdminSession' | 'listEndedAdminSessions' | 'appendAuditEvent'>;

/** A session as its admin sees it (`GET /api/v1/auth/sessions`). */
export interface SessionView {
  id: string;
  created_at: string;
  expires_at: string;
  client_address: string | null;
  current: boolean;
}

/**
 * Admin sessions that can be ended (docs/api-keys.md, "Admin sessions"): each token issued at
 * login is stored as a session; logout, deleting a session, a password change and the CLI's
 * reset end sessions, stored with their audit events and announced to every replica before
 * the answer, as a key's revocation is.
 */
export class SessionService {
  readonly #store: SessionStore;
  readonly #tokens: Pick<SessionTokens, 'issue'> | undefined;
  readonly #listener: SessionEndListener;
  readonly #now: () => Date;

  /** `tokens`: absent where sessions are only ended (the CLI), never opened. */
  constructor(deps: { store: SessionStore; tokens?: Pick<SessionTokens, 'issue'>; listener: SessionEndListener; now: () => Date }) {
    this.#store = deps.store;
    this.#tokens = deps.tokens;
    this.#listener = deps.listener;
    this.#now = deps.now;
  }

  /**
   * A token for the admin, its session stored before the token is handed out, and only while
   * the admin's password hash is still `provenHash` (the one the login checked): a login that
   * races a password change or reset either is stored before it, and ended by it, or is
   * refused. Undefined when refused.
   */
  async open(adminId: number, clientAddress: string | null, provenHash: string): Promise<IssuedSession | undefined> {
    if (this.#tokens === undefined) throw new Error('SessionService: no tokens to open a session with');
    const issued = await this.#tokens.issue(adminId);
    const session = { id: issued.sessionId, adminId, createdAt: issued.issuedAt, expiresAt: issued.expiresAt, clientAddress, endedAt: null };
    return (await this.#store.createAdminSession(session, provenHash)) ? issued : undefined;
  }

  /** Ends the session of the token presented. A token whose session was never stored (issued before sessions were) is recorded ended. */
  async logout(principal: AdminPrincipal, actor: Actor): Promise<void> {
    const now = this.#now();
    const ended = await this.#store.endAdminSessions({ adminId: principal.adminId, id: principal.sessionId }, now, eventOf('logout', actor, now));
    // Nothing ended: either it was ended already (a retry through a replica that had not heard
    // of it) and is only announced again, or the token was issued before sessions were stored.
    if (ended.length === 0 && (await this.#store.findAdminSession(principal.sessionId)) === null) {
      const session = { id: principal.sessionId, adminId: principal.adminId, createdAt: now, expiresAt: principal.expiresAt, clientAddress: actor.address, endedAt: now };
      await this.#store.createAdminSession(session);
      await this.#store.appendAuditEvent(eventOf('logout', actor, now)(session));
    }
    await this.#listener.sessionsEnded([{ id: principal.sessionId, expiresAt: principal.expiresAt }]);
  }

  async list(principal: AdminPrincipal): Promise<SessionView[]> {
    const sessions = await this.#store.listAdminSessions(principal.adminId, this.#now());
    return sessions.map((session) => ({
      id: session.id,
      created_at: session.createdAt.toISOString(),
      expires_at: session.expiresAt.toISOString(),
      client_address: session.clientAddress,
      current: session.id === principal.sessionId,
    }));
  }

  /**
   * Ends one of the caller's own sessions; another admin's, an expired one or an unknown id is
   * 404. One ended already (its end may not have been confirmed everywhere: a `503`) is
   * announced again, as a `DELETE` of a revoked key is.
   */
  async end(principal: AdminPrincipal, sessionId: string, actor: Actor): Promise<void> {
    const now = this.#now();
    const ended = await this.#store.endAdminSessions({ adminId: principal.adminId, id: sessionId }, now, eventOf('session_ended', actor, now));
    if (ended.length > 0) {
      await this.#listener.sessionsEnded(ended);
      return;
    }
    const known = await this.#store.findAdminSession(sessionId);
    if (known === null || known.adminId !== principal.adminId || known.endedAt === null || known.expiresAt.getTime() <= now.getTime()) {
      throw new GatewayError('not_found', 'No such session of yours (expired or never opened)');
    }
    await this.#listener.sessionsEnded([known]);
  }

  /**
   * Ends every session of the admin but `exceptId` (a password change keeps the session that
   * made it); returns those it ended. The admin's sessions ended before and still within their
   * lifetime are announced with them: repeating a change whose end was not confirmed (`503`)
   * confirms it.
   */
  async endAll(adminId: number, actor: Actor, exceptId?: string): Promise<AdminSessionRow[]> {
    const now = this.#now();
    const ended = await this.#store.endAdminSessions({ adminId, ...(exceptId === undefined ? {} : { exceptId }) }, now, eventOf('session_ended', actor, now));
    const earlier = (await this.#store.listEndedAdminSessions(now)).filter(
      (session) => session.adminId === adminId && session.id !== exceptId && !ended.some((row) => row.id === session.id),
    );
    await this.#listener.sessionsEnded([...ended, ...earlier]);
    return ended;
  }
}

function eventOf(action: 'logout' | 'session_ended', actor: Actor, at: Date): AuditOf<AdminSessionRow> {
  return (session) => ({ action, actorKind: actor.kind, actorId: actor.id, subjectId: String(session.adminId), clientAddress: actor.address, detail: { session_id: session.id }, at });
}
