/* eslint-disable @typescript-eslint/no-explicit-any -- HTTP and CLI answers are read as loosely typed JSON */
import { randomUUID } from 'node:crypto';
import { decodeJwt, SignJWT } from 'jose';
import { until } from '../support/until.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOGIN_FAILURE_LIMIT } from '../../src/admin/login.ts';
import { runCli } from '../support/cli-process.ts';
import { ADMIN_EMAIL, ADMIN_PASSWORD, startGateway, tempDataDir, type GatewayProcess } from '../support/gateway-process.ts';
import { loginAdmin, request, type JsonResponse } from '../support/http.ts';
import { rawRequest } from '../support/raw-http.ts';
import { createTestDatabase, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';

/*
 * Admin sessions from outside (docs/api-keys.md, "Admin sessions"): logout, the caller's
 * sessions listed and ended, a password change, and `gatehouse admin reset-password`, each
 * ending sessions whose tokens are then refused with 401 revoked_credential.
 */

const OTHER_EMAIL = 'second-admin@example.test';
const OTHER_PASSWORD = 'the second admin password';
/** Exactly the shortest a new password may be. */
const NEW_PASSWORD = 'twelve chars';
const SESSIONS = '/api/v1/auth/sessions';
const JWT_SECRET = 'a-test-secret-that-is-long-enough-for-hs256';
const ADMIN_ROUTE = '/api/v1/api-keys';

const jti = (token: string) => decodeJwt(token).jti!;
const sub = (token: string) => decodeJwt(token).sub!;

/** A second admin, added with the CLI to the store the gateway will use (before it holds an embedded store). */
async function addAdmin(env: Record<string, string>, email: string, password: string): Promise<void> {
  const added = await runCli(['admin', 'add', '--email', email], env, `${password}\n`);
  expect(added.code, added.stderr).toBe(0);
}

function expectProblem(response: JsonResponse, status: number, code: string): void {
  expect(response.status, response.text).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(response.body.code).toBe(code);
}

/** The answer to a token whose session has ended. */
function expectEnded(response: JsonResponse): void {
  expectProblem(response, 401, 'revoked_credential');
  expect(response.headers.get('www-authenticate')).toMatch(/^Bearer .*error="invalid_token"/);
}

interface StoreUnderTest {
  name: string;
  available: boolean;
  /** The gateway's (and the CLI's) store variables, and how to throw the store away. */
  open(): Promise<{ env: Record<string, string>; dispose(): Promise<void> }>;
}

const STORES: StoreUnderTest[] = [
  {
    name: 'embedded store',
    available: true,
    open: async () => ({ env: { DATA_DIR: tempDataDir() }, dispose: async () => {} }),
  },
  {
    name: 'PostgreSQL',
    available: postgresUrl() !== null,
    async open() {
      const database = await createTestDatabase();
      return { env: { DATABASE_URL: database.url }, dispose: () => database.drop() };
    },
  },
];

for (const storeUnderTest of STORES) {
  describe.skipIf(!storeUnderTest.available)(`admin sessions (spawned gateway, ${storeUnderTest.name})`, () => {
    let gateway: GatewayProcess;
    let dispose: () => Promise<void> = async () => {};
    /** Every token issued in this suite and every password used: none may show in the audit trail or the log. */
    const secrets: string[] = [ADMIN_PASSWORD, OTHER_PASSWORD, NEW_PASSWORD];
    /** The first admin's tokens, as issued: every one but the caller's is refused after the password change. */
    const issued: string[] = [];
    let password = ADMIN_PASSWORD;

    beforeAll(async () => {
      const store = await storeUnderTest.open();
      dispose = store.dispose;
      await addAdmin(store.env, OTHER_EMAIL, OTHER_PASSWORD);
      gateway = await startGateway({ ...store.env, ADMIN_SESSION_TTL: '30m', JWT_SECRET });
    });
    afterAll(async () => {
      await gateway?.stop();
      await dispose();
    });

    async function token(email = ADMIN_EMAIL, pass = email === ADMIN_EMAIL ? password : OTHER_PASSWORD): Promise<string> {
      const issuedToken = await loginAdmin(gateway.url, email, pass);
      secrets.push(issuedToken);
      if (email === ADMIN_EMAIL) issued.push(issuedToken);
      return issuedToken;
    }
    const adminCall = (bearer: string) => request(`${gateway.url}${ADMIN_ROUTE}`, { token: bearer });
    const listSessions = (bearer: string) => request(`${gateway.url}${SESSIONS}`, { token: bearer });
    const logout = (bearer: string) => request(`${gateway.url}/api/v1/auth/logout`, { method: 'POST', token: bearer });
    const endSession = (bearer: string, id: string) => request(`${gateway.url}${SESSIONS}/${id}`, { method: 'DELETE', token: bearer });
    const changePassword = (bearer: string, json: unknown) => request(`${gateway.url}/api/v1/auth/password`, { method: 'POST', token: bearer, json });

    /** Session ids and tokens the audit test looks for. */
    let loggedOut: string;
    let deleted: string;

    it('logout: 204, then that token is refused on every admin endpoint; the admin\'s other sessions keep working', async () => {
      const mine = await token();
      const kept = await token();
      expect((await adminCall(mine)).status).toBe(200);

      const answer = await logout(mine);
      expect(answer.status).toBe(204);
      expect(answer.text).toBe('');
      loggedOut = jti(mine);

      expectEnded(await adminCall(mine));
      expectEnded(await listSessions(mine));
      expectEnded(await request(`${gateway.url}/api/v1/audit-events`, { token: mine }));
      // A proxied route that takes an admin token (the route table's catch-all): refused, never forwarded.
      expectEnded(await request(`${gateway.url}/platform/dashboard`, { token: mine }));
      expect((await request(`${gateway.url}/platform/dashboard`, { token: kept })).status).not.toBe(401);
      // A second logout with it is refused like any other use.
      expectEnded(await logout(mine));

      expect((await adminCall(kept)).status).toBe(200);
      const listed = await listSessions(kept);
      expect(listed.body.map((session: any) => session.id)).not.toContain(loggedOut);
    });

    it('logout of a token whose session was never stored (issued before sessions were): 204, and refused from then on', async () => {
      const adminId = sub(await token());
      const at = Math.floor(Date.now() / 1000);
      const legacy = await new SignJWT({})
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setIssuer('gatehouse')
        .setAudience('gatehouse-admin')
        .setSubject(adminId)
        .setJti(randomUUID())
        .setIssuedAt(at)
        .setExpirationTime(at + 600)
        .sign(new TextEncoder().encode(JWT_SECRET));
      secrets.push(legacy);
      expect((await adminCall(legacy)).status).toBe(200);
      const listed = (await listSessions(legacy)).body as any[];
      expect(listed.map((session) => session.id)).not.toContain(jti(legacy));
      expect(listed.filter((session) => session.current)).toEqual([]);

      expect((await logout(legacy)).status).toBe(204);
      expectEnded(await adminCall(legacy));
      expectEnded(await logout(legacy));
      expect((await listSessions(await token())).body.map((session: any) => session.id)).not.toContain(jti(legacy));
    });

    it('GET sessions: the caller\'s live sessions, oldest first, exactly one current, never another admin\'s', async () => {
      const first = await token();
      const second = await token();
      const theirs = await token(OTHER_EMAIL);

      const listed = await listSessions(first);
      expect(listed.status).toBe(200);
      expect(listed.headers.get('cache-control')).toBe('no-store');
      const sessions: any[] = listed.body;
      const ids = sessions.map((session) => session.id);
      expect(ids).toEqual(expect.arrayContaining([jti(first), jti(second)]));
      expect(ids).not.toContain(jti(theirs));
      expect(ids).not.toContain(loggedOut);
      expect(new Set(ids).size).toBe(ids.length);
      expect(sessions.filter((session) => session.current).map((session) => session.id)).toEqual([jti(first)]);
      const createdAt = sessions.map((session) => Date.parse(session.created_at));
      expect(createdAt).toEqual(createdAt.toSorted((a, b) => a - b));

      const claims = decodeJwt(first);
      expect(sessions.find((session) => session.id === jti(first))).toEqual({
        id: jti(first),
        created_at: new Date(claims.iat! * 1000).toISOString(),
        expires_at: new Date(claims.exp! * 1000).toISOString(),
        client_address: '127.0.0.1',
        current: true,
      });

      const fromSecond = (await listSessions(second)).body as any[];
      expect(fromSecond.map((session) => session.id)).toEqual(ids);
      expect(fromSecond.filter((session) => session.current).map((session) => session.id)).toEqual([jti(second)]);

      const fromTheirs = (await listSessions(theirs)).body as any[];
      expect(fromTheirs.map((session) => session.id)).toEqual([jti(theirs)]);
      expect(fromTheirs[0].current).toBe(true);
    });

    it('DELETE one of the caller\'s own sessions: 204, and that token is refused; the caller\'s own, too', async () => {
      const mine = await token();
      const other = await token();
      const answer = await endSession(mine, jti(other));
      expect(answer.status).toBe(204);
      expect(answer.text).toBe('');
      deleted = jti(other);
      expectEnded(await adminCall(other));
      expect((await adminCall(mine)).status).toBe(200);
      expect((await listSessions(mine)).body.map((session: any) => session.id)).not.toContain(deleted);

      // Its own session, by id: as a logout.
      const self = await token();
      expect((await endSession(self, jti(self))).status).toBe(204);
      expectEnded(await adminCall(self));
    });

    it('DELETE of one of my sessions already ended is 204 again, announced again (a 503 is confirmed by repeating it)', async () => {
      const mine = await token();
      const ended = await token();
      expect((await logout(ended)).status).toBe(204);
      expect((await endSession(mine, jti(ended))).status).toBe(204);
      expectEnded(await adminCall(ended));
      expect((await adminCall(mine)).status).toBe(200);
    });

    it('DELETE of another admin\'s session, an unknown or a hostile id is 404 and ends nothing', async () => {
      const mine = await token();
      const live = await token();
      const theirs = await token(OTHER_EMAIL);

      for (const [what, id] of [
        ['another admin\'s session', jti(theirs)],
        ['an unknown id', randomUUID()],
        ['a live session, percent-encoded', `%${jti(live).charCodeAt(0).toString(16)}${jti(live).slice(1)}`],
        ['a live session, upper-cased', jti(live).toUpperCase()],
        ['a live session with a query', `${jti(live).slice(0, -1)}?${jti(live).slice(-1)}`],
        ['an id too long', 'a'.repeat(65)],
        ['dots inside an id', `${jti(live)}..`],
        ['an encoded slash', `${jti(live)}%2F`],
      ]) {
        const answer = await endSession(mine, id!);
        expect(answer.status, what).toBe(404);
        expectProblem(answer, 404, 'not_found');
      }
      // Targets fetch would normalise, sent as they are: an empty id or `..` names no session; a path that another
      // parser could read as the live session's names no endpoint exactly, so under the gateway's reserved paths it
      // is 404 (docs/security.md, "Reserved paths"), never the live session's end.
      const port = Number(new URL(gateway.url).port);
      for (const [path, status, code] of [
        [`${SESSIONS}/`, 404, 'not_found'],
        [`${SESSIONS}/..`, 404, 'not_found'],
        [`${SESSIONS}/../sessions/${jti(live)}`, 404, 'not_found'],
        [`${SESSIONS}/./${jti(live)}`, 404, 'not_found'],
        [`${SESSIONS}//${jti(live)}`, 404, 'not_found'],
      ] as const) {
        const answer = await rawRequest(port, `DELETE ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${mine}\r\nConnection: close\r\n\r\n`);
        expect(answer.status, `${path}: ${answer.raw}`).toBe(status);
        expect(answer.headers['content-type'], path).toMatch(/^application\/problem\+json/);
        expect(JSON.parse(answer.body).code, path).toBe(code);
      }

      for (const bearer of [mine, live, theirs]) expect((await adminCall(bearer)).status).toBe(200);
      expect((await listSessions(theirs)).body.map((session: any) => session.id)).toContain(jti(theirs));
    });

    it.each<[string, number, string, RequestInit & { json?: unknown }, string?]>([
      ['a new password under 12 characters', 400, 'validation_failed', { json: { current_password: ADMIN_PASSWORD, new_password: 'eleven char' } }, 'new_password'],
      ['11 characters that are 22 UTF-16 code units', 400, 'validation_failed', { json: { current_password: ADMIN_PASSWORD, new_password: '\u{1F511}'.repeat(11) } }, 'new_password'],
      ['a new password the same as the current one', 400, 'validation_failed', { json: { current_password: ADMIN_PASSWORD, new_password: ADMIN_PASSWORD } }, 'new_password'],
      ['an unknown field', 400, 'validation_failed', { json: { current_password: ADMIN_PASSWORD, new_password: 'a long enough password', admin_id: 2 } }],
      ['a missing new password', 400, 'validation_failed', { json: { current_password: ADMIN_PASSWORD } }, 'new_password'],
      ['a missing current password', 400, 'validation_failed', { json: { new_password: 'a long enough password' } }, 'current_password'],
      ['a new password that is not a string', 400, 'validation_failed', { json: { current_password: ADMIN_PASSWORD, new_password: 123456789012345 } }, 'new_password'],
      ['an array', 400, 'validation_failed', { json: [ADMIN_PASSWORD, 'a long enough password'] }],
      ['a body that is not JSON', 400, 'bad_request', { body: '{"current_password": ', headers: { 'content-type': 'application/json' } }],
      ['an empty JSON body', 400, 'bad_request', { body: '', headers: { 'content-type': 'application/json' } }],
      ['no body', 400, 'validation_failed', {}],
      ['text/plain', 415, 'unsupported_media_type', { body: JSON.stringify({ current_password: ADMIN_PASSWORD, new_password: 'a long enough password' }), headers: { 'content-type': 'text/plain' } }],
      ['a form', 415, 'unsupported_media_type', { body: 'current_password=x&new_password=y', headers: { 'content-type': 'application/x-www-form-urlencoded' } }],
    ])('POST password refuses %s: %i %s, and changes nothing', async (what, status, code, init, field) => {
      const mine = await token();
      const other = await token();
      const answer = await request(`${gateway.url}/api/v1/auth/password`, { method: 'POST', token: mine, ...init });
      expectProblem(answer, status, code);
      if (field !== undefined) expect(answer.body.errors.map((error: any) => error.field)).toContain(field);
      if (what === 'an unknown field') expect(answer.body.errors).toContainEqual({ field: 'body', message: 'unknown field' });
      // Nothing changed: both sessions work, the password is the same.
      for (const bearer of [mine, other]) expect((await adminCall(bearer)).status).toBe(200);
      expect((await request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } })).status).toBe(200);
    });

    it('POST password with a wrong current password is 401 invalid_credential and changes nothing', async () => {
      const mine = await token();
      const other = await token();
      const answer = await changePassword(mine, { current_password: 'not the password at all', new_password: 'a long enough password' });
      expectProblem(answer, 401, 'invalid_credential');
      for (const bearer of [mine, other]) expect((await adminCall(bearer)).status).toBe(200);
      expect((await request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: ADMIN_EMAIL, password: 'a long enough password' } })).status).toBe(401);
    });

    it('POST password: 204; the caller\'s session keeps working, every other of that admin is refused, the new password logs in and the old does not', async () => {
      const caller = await token();
      const others = [await token(), await token()];
      const theirs = await token(OTHER_EMAIL);
      const before = issued.filter((bearer) => bearer !== caller);

      const answer = await changePassword(caller, { current_password: ADMIN_PASSWORD, new_password: NEW_PASSWORD });
      expect(answer.status, answer.text).toBe(204);
      expect(answer.text).toBe('');
      password = NEW_PASSWORD;

      expect((await adminCall(caller)).status).toBe(200);
      for (const bearer of [...others, ...before]) expectEnded(await adminCall(bearer));
      expect((await adminCall(theirs)).status).toBe(200);

      expectProblem(await request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } }), 401, 'invalid_credential');
      const fresh = await token();
      expect((await adminCall(fresh)).status).toBe(200);
      // (Created within one second, the two may be listed in either order: created_at is the token's iat.)
      expect((await listSessions(caller)).body.map((session: any) => session.id).toSorted()).toEqual([jti(caller), jti(fresh)].toSorted());

      // The old password is no longer the current one.
      expectProblem(await changePassword(caller, { current_password: ADMIN_PASSWORD, new_password: 'yet another password' }), 401, 'invalid_credential');
    });

    it('audits logout, session_ended and password_changed with the session id, and shows no secret anywhere', async () => {
      const reader = await token();
      const answer = await request(`${gateway.url}/api/v1/audit-events?limit=500`, { token: reader });
      expect(answer.status).toBe(200);
      const events: any[] = answer.body;
      const adminId = sub(reader);
      const byAdmin = { actor_kind: 'admin', actor_id: adminId, subject_id: adminId, client_address: '127.0.0.1' };

      expect(events.filter((event) => event.action === 'logout' && event.detail.session_id === loggedOut)).toEqual([
        { ...byAdmin, id: expect.any(Number), at: expect.any(String), action: 'logout', detail: { session_id: loggedOut } },
      ]);
      expect(events.filter((event) => event.action === 'session_ended' && event.detail.session_id === deleted)).toEqual([
        { ...byAdmin, id: expect.any(Number), at: expect.any(String), action: 'session_ended', detail: { session_id: deleted } },
      ]);
      const changed = events.filter((event) => event.action === 'password_changed');
      expect(changed).toEqual([{ ...byAdmin, id: expect.any(Number), at: expect.any(String), action: 'password_changed', detail: {} }]);
      // The change ended the admin's other live sessions, one event each, after the change itself.
      const endedByChange = events.filter((event) => event.action === 'session_ended' && event.id > changed[0].id);
      expect(endedByChange.length).toBeGreaterThanOrEqual(2);
      for (const event of endedByChange) expect(event).toMatchObject({ ...byAdmin, detail: { session_id: expect.any(String) } });
      expect(new Set(endedByChange.map((event) => event.detail.session_id)).size).toBe(endedByChange.length);
      // Only the first admin's sessions were ended, and never by an event of the other's.
      expect(events.filter((event) => ['logout', 'session_ended', 'password_changed'].includes(event.action)).every((event) => event.subject_id === adminId)).toBe(true);

      for (const secret of secrets) {
        expect(answer.text).not.toContain(secret);
        expect(gateway.output()).not.toContain(secret);
      }
      expect(answer.text).not.toContain('argon2');
    });
  });
}

describe('an ended session stays ended across a restart (spawned gateway, embedded store)', () => {
  let gateway: GatewayProcess | undefined;
  afterAll(async () => {
    await gateway?.stop();
  });

  it('the restarted gateway reads the ended sessions from the store before it answers', async () => {
    const env = { DATA_DIR: tempDataDir() };
    gateway = await startGateway(env);
    const ended = await loginAdmin(gateway.url);
    const deleted = await loginAdmin(gateway.url);
    const kept = await loginAdmin(gateway.url);
    expect((await request(`${gateway.url}/api/v1/auth/logout`, { method: 'POST', token: ended })).status).toBe(204);
    expect((await request(`${gateway.url}${SESSIONS}/${jti(deleted)}`, { method: 'DELETE', token: kept })).status).toBe(204);
    expect(await gateway.stop()).toBe(0);

    gateway = await startGateway(env);
    for (const token of [ended, deleted]) expectEnded(await request(`${gateway.url}${ADMIN_ROUTE}`, { token }));
    expect((await request(`${gateway.url}${ADMIN_ROUTE}`, { token: kept })).status).toBe(200);
  });
});

describe('a password change is throttled with logins (spawned gateway)', () => {
  let gateway: GatewayProcess;
  beforeAll(async () => {
    gateway = await startGateway();
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it(`after ${LOGIN_FAILURE_LIMIT} wrong current passwords the next change is 429, even with the right one, and so is a login`, async () => {
    const token = await loginAdmin(gateway.url);
    const change = (current: string) =>
      request(`${gateway.url}/api/v1/auth/password`, { method: 'POST', token, json: { current_password: current, new_password: 'a long enough new password' } });
    for (let attempt = 0; attempt < LOGIN_FAILURE_LIMIT; attempt++) expectProblem(await change(`wrong password ${attempt}`), 401, 'invalid_credential');

    const throttled = await change(ADMIN_PASSWORD);
    expectProblem(throttled, 429, 'rate_limited');
    const retryAfter = Number(throttled.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(800);
    expect(retryAfter).toBeLessThanOrEqual(900);
    expectProblem(await request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } }), 429, 'rate_limited');

    // Throttled, not logged out: the token works, and the password was never changed.
    expect((await request(`${gateway.url}${ADMIN_ROUTE}`, { token })).status).toBe(200);
    expect(gateway.output()).not.toMatch(/wrong password \d/);
  });
});

/*
 * `gatehouse admin reset-password` beside a running gateway on the same PostgreSQL: every
 * session of that admin ends. With REDIS_URL the command returns once the gateway has applied
 * it; without, the gateway re-reads the ended sessions every KEY_CACHE_TTL.
 */
describe.skipIf(postgresUrl() === null)('gatehouse admin reset-password ends every session of that admin', () => {
  const started: Array<{ gateway?: GatewayProcess; database: TestDatabase }> = [];
  afterAll(async () => {
    for (const { gateway, database } of started) {
      await gateway?.stop();
      await database.drop();
    }
  });

  /** A gateway on a fresh database of its own: the first admin from its environment, the second from the CLI. */
  async function gatewayOnPostgres(env: Record<string, string>): Promise<{ gateway: GatewayProcess; databaseUrl: string }> {
    const database = await createTestDatabase();
    const entry: (typeof started)[number] = { database };
    started.push(entry);
    entry.gateway = await startGateway({ DATABASE_URL: database.url, ...env });
    await addAdmin({ DATABASE_URL: database.url }, OTHER_EMAIL, OTHER_PASSWORD);
    return { gateway: entry.gateway, databaseUrl: database.url };
  }

  const adminCall = (gateway: GatewayProcess, token: string) => request(`${gateway.url}${ADMIN_ROUTE}`, { token });

  async function resetPassword(env: Record<string, string>, newPassword: string) {
    const reset = await runCli(['admin', 'reset-password', '--email', ADMIN_EMAIL, '--json'], env, `${newPassword}\n`);
    expect(reset.code, reset.stderr).toBe(0);
    expect(reset.stdout).not.toContain(newPassword);
    return reset.json<any>();
  }

  async function afterwards(gateway: GatewayProcess, newPassword: string, theirs: string): Promise<void> {
    expect((await adminCall(gateway, theirs)).status).toBe(200);
    expectProblem(await request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } }), 401, 'invalid_credential');
    const fresh = await loginAdmin(gateway.url, ADMIN_EMAIL, newPassword);
    expect((await adminCall(gateway, fresh)).status).toBe(200);
    const events: any[] = (await request(`${gateway.url}/api/v1/audit-events?limit=500`, { token: fresh })).body;
    const reset = events.find((event) => event.action === 'admin_password_reset');
    expect(reset).toMatchObject({ actor_kind: 'cli', subject_id: sub(fresh) });
    const ended = events.filter((event) => event.action === 'session_ended');
    expect(ended.length).toBeGreaterThanOrEqual(2);
    for (const event of ended) expect(event).toMatchObject({ actor_kind: 'cli', subject_id: sub(fresh), detail: { session_id: expect.any(String) } });
    expect(JSON.stringify(events)).not.toContain(newPassword);
  }

  /** Still served (the ended sessions not re-read yet): false; refused: true, refused as an ended session. */
  const refusedAsEnded = (answer: Awaited<ReturnType<typeof adminCall>>): boolean => {
    if (answer.status === 200) return false;
    expectEnded(answer);
    return true;
  };

  it('without REDIS_URL: the running gateway refuses the tokens once it re-reads the ended sessions', async () => {
    const { gateway, databaseUrl } = await gatewayOnPostgres({ KEY_CACHE_TTL: '1s' });
    const tokens = [await loginAdmin(gateway.url), await loginAdmin(gateway.url)];
    const theirs = await loginAdmin(gateway.url, OTHER_EMAIL, OTHER_PASSWORD);
    for (const token of tokens) expect((await adminCall(gateway, token)).status).toBe(200);

    const newPassword = 'reset without redis';
    const result = await resetPassword({ DATABASE_URL: databaseUrl }, newPassword);
    expect(result).toMatchObject({ email: ADMIN_EMAIL, sessions_ended: 2 });

    // Polled, never slept on: refused once the gateway has re-read the ended sessions (every KEY_CACHE_TTL).
    for (const token of tokens) await until(async () => refusedAsEnded(await adminCall(gateway, token)), 'the token to be refused');
    await afterwards(gateway, newPassword, theirs);
  });

  it('with REDIS_URL unreachable: the password and the ends are stored, the command fails with store_unavailable', async () => {
    const { gateway, databaseUrl } = await gatewayOnPostgres({ KEY_CACHE_TTL: '1s' });
    const token = await loginAdmin(gateway.url);
    const newPassword = 'reset with redis away';
    const reset = await runCli(['admin', 'reset-password', '--email', ADMIN_EMAIL, '--json'], { DATABASE_URL: databaseUrl, REDIS_URL: 'redis://127.0.0.1:1' }, `${newPassword}\n`);
    expect(reset.code).toBe(1);
    expect(reset.json<any>().error.code).toBe('store_unavailable');
    // Stored all the same: the gateway (without Redis) refuses the token once it re-reads the ended sessions.
    await until(async () => refusedAsEnded(await adminCall(gateway, token)), 'the token to be refused');
    expect((await adminCall(gateway, await loginAdmin(gateway.url, ADMIN_EMAIL, newPassword))).status).toBe(200);
  });

  describe.skipIf(redisUrl() === null)('with REDIS_URL', () => {
    it('the running gateway refuses the tokens before the command exits', async () => {
      // A long KEY_CACHE_TTL: only the revocation bus can tell the gateway in time.
      const { gateway, databaseUrl } = await gatewayOnPostgres({ REDIS_URL: redisUrl()!, KEY_CACHE_TTL: '10m' });
      const tokens = [await loginAdmin(gateway.url), await loginAdmin(gateway.url), await loginAdmin(gateway.url)];
      const theirs = await loginAdmin(gateway.url, OTHER_EMAIL, OTHER_PASSWORD);
      for (const token of tokens) expect((await adminCall(gateway, token)).status).toBe(200);

      const newPassword = 'reset with redis';
      const result = await resetPassword({ DATABASE_URL: databaseUrl, REDIS_URL: redisUrl()! }, newPassword);
      expect(result).toMatchObject({ email: ADMIN_EMAIL, sessions_ended: 3 });
      for (const token of tokens) expectEnded(await adminCall(gateway, token));
      await afterwards(gateway, newPassword, theirs);
    });
  });
});
