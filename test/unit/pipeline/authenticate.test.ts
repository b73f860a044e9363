import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { EndedSessions } from '../../../src/admin/ended-sessions.ts';
import { SessionTokens } from '../../../src/admin/sessions.ts';
import { Authenticator } from '../../../src/pipeline/authenticate.ts';
import { RequestPipeline } from '../../../src/pipeline/request-pipeline.ts';
import type { AdminPrincipal } from '../../../src/policy/principal.ts';
import { compileRoutes } from '../../../src/policy/routes.ts';
import type { AdminSessionRow } from '../../../src/store/store.ts';
import type { KeyVerifier } from '../../../src/verify/key-verifier.ts';
import { ALL_FEATURES, defaultTables } from '../policy/support.ts';
import { LocalRateLimiter } from '../../../src/limits/rate-limiter.ts';

const NOW = new Date('2030-06-01T12:00:00.000Z');
const TTL_SECONDS = 3_600;

/** The key verifier's part the admin path reads: whether this replica may trust what it holds in memory. */
class FakeVerifier {
  degraded = false;
  tryVerifyCached(): undefined {
    return undefined;
  }
  verify(): Promise<never> {
    return Promise.reject(new Error('no API keys in these tests'));
  }
}

/** The store's session rows, and every read of one. */
class FakeStore {
  readonly rows = new Map<string, AdminSessionRow>();
  readonly reads: string[] = [];
  failing = false;
  findAdminSession = async (id: string): Promise<AdminSessionRow | null> => {
    this.reads.push(id);
    if (this.failing) throw new Error('store down');
    return this.rows.get(id) ?? null;
  };
  endedRow(session: { sessionId: string; expiresAt: Date }, endedAt: Date | null = NOW): void {
    this.rows.set(session.sessionId, { id: session.sessionId, adminId: 1, createdAt: NOW, expiresAt: session.expiresAt, clientAddress: null, endedAt });
  }
}

async function setup() {
  const tokens = new SessionTokens({ secret: new TextEncoder().encode('a unit test secret of enough length'), ttlSeconds: TTL_SECONDS, now: () => NOW });
  const verifier = new FakeVerifier();
  const store = new FakeStore();
  const ended = new EndedSessions({ now: () => NOW.getTime(), tokenTtlMs: TTL_SECONDS * 1000 });
  const authenticator = new Authenticator({ verifier: verifier as unknown as KeyVerifier, sessions: tokens, ended, store });
  const issued = await tokens.issue(1);
  return { tokens, verifier, store, ended, authenticator, issued, credential: { kind: 'jwt', token: issued.token } as const };
}

const principalOf = async (value: unknown) => (await value) as AdminPrincipal;

describe('Authenticator: admin sessions', () => {
  it('a live session, not degraded: its principal, from memory once verified (no promise, no store read)', async () => {
    const { authenticator, store, credential, issued } = await setup();
    const first = await principalOf(authenticator.authenticate(credential, '127.0.0.1'));
    expect(first).toMatchObject({ kind: 'admin', adminId: 1, sessionId: issued.sessionId, revoked: false });
    const cached = authenticator.authenticate(credential, '127.0.0.1');
    expect(cached).not.toBeInstanceOf(Promise);
    expect(cached).toBe(first);
    expect(store.reads).toEqual([]);
  });

  it('an ended session: its principal revoked, at once and without a store read', async () => {
    const { authenticator, store, ended, credential, issued } = await setup();
    await authenticator.authenticate(credential, '127.0.0.1');
    ended.end(issued.sessionId, issued.expiresAt);
    const answer = authenticator.authenticate(credential, '127.0.0.1');
    expect(answer).not.toBeInstanceOf(Promise);
    expect(answer).toMatchObject({ kind: 'admin', sessionId: issued.sessionId, revoked: true });
    expect(store.reads).toEqual([]);
  });

  it('an ended session whose token was never verified here: revoked once verified', async () => {
    const { authenticator, ended, credential, issued } = await setup();
    ended.end(issued.sessionId);
    expect(await principalOf(authenticator.authenticate(credential, '127.0.0.1'))).toMatchObject({ revoked: true });
  });

  it('another session of the same admin is not touched', async () => {
    const { authenticator, tokens, ended, credential } = await setup();
    const other = await tokens.issue(1);
    ended.end(other.sessionId, other.expiresAt);
    expect(await principalOf(authenticator.authenticate(credential, '127.0.0.1'))).toMatchObject({ revoked: false });
  });

  it('not degraded: an end stored but not told to this replica is not looked for (no cost on the hot path)', async () => {
    const { authenticator, store, credential, issued } = await setup();
    store.endedRow(issued);
    for (let i = 0; i < 3; i++) expect(await principalOf(authenticator.authenticate(credential, '127.0.0.1'))).toMatchObject({ revoked: false });
    expect(store.reads).toEqual([]);
  });

  it('trusted again but not yet re-read (ends may have been missed while degraded): the store is asked until it is', async () => {
    const { authenticator, ended, store, credential, issued } = await setup();
    await authenticator.authenticate(credential, '127.0.0.1');
    const generation = ended.generation + 1;
    ended.unsync();
    store.endedRow(issued);
    expect(await principalOf(authenticator.authenticate(credential, '127.0.0.1'))).toMatchObject({ revoked: true });
    expect(store.reads).toEqual([issued.sessionId]);
    ended.markSynced(generation);
    expect(authenticator.authenticate(credential, '127.0.0.1')).toMatchObject({ revoked: true });
    expect(store.reads).toHaveLength(1);
  });

  it('degraded: the store is asked on every request, and an end found there is refused and remembered', async () => {
    const { authenticator, verifier, store, credential, issued } = await setup();
    await authenticator.authenticate(credential, '127.0.0.1');
    verifier.degraded = true;
    const live = authenticator.authenticate(credential, '127.0.0.1');
    expect(live).toBeInstanceOf(Promise);
    expect(await principalOf(live)).toMatchObject({ revoked: false });
    expect(await principalOf(authenticator.authenticate(credential, '127.0.0.1'))).toMatchObject({ revoked: false });
    expect(store.reads).toEqual([issued.sessionId, issued.sessionId]);

    store.endedRow(issued);
    expect(await principalOf(authenticator.authenticate(credential, '127.0.0.1'))).toMatchObject({ revoked: true });
    expect(store.reads).toHaveLength(3);
    // Remembered: the next request is refused from memory, degraded or not.
    const next = authenticator.authenticate(credential, '127.0.0.1');
    expect(next).not.toBeInstanceOf(Promise);
    expect(next).toMatchObject({ revoked: true });
    verifier.degraded = false;
    expect(authenticator.authenticate(credential, '127.0.0.1')).toMatchObject({ revoked: true });
    expect(store.reads).toHaveLength(3);
  });

  it('degraded: a session the store never stored (a token older than sessions) or holds live is allowed', async () => {
    const { authenticator, verifier, store, credential, issued } = await setup();
    verifier.degraded = true;
    expect(await principalOf(authenticator.authenticate(credential, '127.0.0.1'))).toMatchObject({ revoked: false });
    store.endedRow(issued, null);
    expect(await principalOf(authenticator.authenticate(credential, '127.0.0.1'))).toMatchObject({ revoked: false });
  });

  it('degraded and the store down: the failure goes on as an error, never an allowed principal', async () => {
    const { authenticator, verifier, store, credential } = await setup();
    verifier.degraded = true;
    store.failing = true;
    await expect(authenticator.authenticate(credential, '127.0.0.1')).rejects.toThrow('store down');
  });
});

describe('RequestPipeline with the Authenticator: an ended session is refused with revoked_credential', () => {
  async function pipelineSetup() {
    const parts = await setup();
    const tables = defaultTables();
    const pipeline = new RequestPipeline({ routes: compileRoutes(tables), tables, authenticator: parts.authenticator, licence: { features: ALL_FEATURES }, now: () => NOW, limiter: new LocalRateLimiter() });
    const request = { method: 'GET', headers: { authorization: `Bearer ${parts.issued.token}` }, rawHeaders: ['Authorization', `Bearer ${parts.issued.token}`], socket: { remoteAddress: '127.0.0.9' } } as unknown as IncomingMessage;
    return { ...parts, pipeline, request };
  }

  it('the admin endpoints: allowed, then 401 revoked_credential once ended', async () => {
    const { pipeline, request, ended, issued } = await pipelineSetup();
    expect(await pipeline.authorizeAdmin(request)).toMatchObject({ kind: 'admin', sessionId: issued.sessionId, revoked: false });
    ended.end(issued.sessionId, issued.expiresAt);
    expect(await pipeline.authorizeAdmin(request)).toMatchObject({ allow: false, status: 401, code: 'revoked_credential' });
  });

  it('degraded, ended in the store only: 401 revoked_credential', async () => {
    const { pipeline, request, verifier, store, issued } = await pipelineSetup();
    verifier.degraded = true;
    store.endedRow(issued);
    expect(await pipeline.authorizeAdmin(request)).toMatchObject({ allow: false, status: 401, code: 'revoked_credential' });
  });
});
