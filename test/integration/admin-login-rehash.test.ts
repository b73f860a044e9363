import { afterAll, beforeAll, expect, it } from 'vitest';
import { LoginService } from '../../src/admin/login.ts';
import { SessionService } from '../../src/admin/session-service.ts';
import { SessionTokens } from '../../src/admin/sessions.ts';
import { Argon2Hasher } from '../../src/crypto/argon2.ts';
import { argon2ParamsOf, type Argon2Params } from '../../src/crypto/argon2-params.ts';
import { MemoryFailureLimiter } from '../../src/limits/failure-limiter.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/store.ts';
import { createTestDatabase, describeWithPostgres, type TestDatabase } from '../support/services.ts';

const EMAIL = 'ops@example.test';
const PASSWORD = 'correct horse battery staple';
const BEFORE = { memoryKiB: 1024, timeCost: 1, parallelism: 1 };
const AFTER = { memoryKiB: 1024, timeCost: 3, parallelism: 1 };

/** A real hasher that notes the parameters of every hash a login is verified against. */
function recordingHasher(params: Argon2Params) {
  const hasher = new Argon2Hasher({ ...params, concurrency: 2 });
  const verifiedAgainst: Array<Argon2Params | undefined> = [];
  return {
    verifiedAgainst,
    get params() {
      return hasher.params;
    },
    hashLogin: hasher.hashLogin.bind(hasher),
    loginLaneHasRoom: hasher.loginLaneHasRoom.bind(hasher),
    verifyLogin(encoded: string, secret: string) {
      verifiedAgainst.push(argon2ParamsOf(encoded));
      return hasher.verifyLogin(encoded, secret);
    },
  };
}

/** A gateway (re)started with the given ARGON2_* settings on the same database. */
function start(store: Store, params: Argon2Params) {
  const hasher = recordingHasher(params);
  const tokens = new SessionTokens({ secret: new TextEncoder().encode('x'.repeat(32)), ttlSeconds: 60, now: () => new Date() });
  const sessions = new SessionService({ store, tokens, listener: { sessionsEnded: async () => {} }, now: () => new Date() });
  const limiter = new MemoryFailureLimiter({ limit: 100, windowMs: 60_000 });
  const errors: unknown[] = [];
  return { hasher, errors, login: new LoginService({ store, hasher, sessions, limiter, onError: (error) => errors.push(error) }) };
}

describeWithPostgres('admin login after an argon2id settings change (PostgreSQL)', () => {
  let database: TestDatabase;
  let store: Store;

  beforeAll(async () => {
    database = await createTestDatabase();
    store = await openStore({ databaseUrl: database.url, dataDir: 'unused', poolSize: 4 });
    await store.createAdmin(EMAIL, await new Argon2Hasher({ ...BEFORE, concurrency: 1 }).hash(PASSWORD));
  });
  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });

  it('verifies an unknown email against a hash made like the stored admin hash, then upgrades that hash at the next successful login', async () => {
    const gateway = start(store, AFTER);

    // Not yet upgraded: a wrong password for the real admin and an unknown email cost the same.
    expect((await gateway.login.login(EMAIL, 'wrong password', '192.0.2.1')).ok).toBe(false);
    expect((await gateway.login.login('nobody@example.test', PASSWORD, '192.0.2.1')).ok).toBe(false);
    expect(gateway.hasher.verifiedAgainst).toEqual([BEFORE, BEFORE]);
    expect(argon2ParamsOf((await store.findAdminByEmail(EMAIL))!.passwordHash)).toEqual(BEFORE);

    // A successful login rewrites the stored hash with the current settings; the password still works.
    expect((await gateway.login.login(EMAIL, PASSWORD, '192.0.2.1')).ok).toBe(true);
    const stored = (await store.findAdminByEmail(EMAIL))!.passwordHash;
    expect(argon2ParamsOf(stored)).toEqual(AFTER);
    expect(await new Argon2Hasher({ ...AFTER, concurrency: 1 }).verify(stored, PASSWORD)).toBe(true);

    // The decoy followed: an unknown email now costs what the upgraded admin costs.
    gateway.hasher.verifiedAgainst.length = 0;
    expect((await gateway.login.login(EMAIL, 'wrong password', '192.0.2.1')).ok).toBe(false);
    expect((await gateway.login.login('nobody@example.test', PASSWORD, '192.0.2.1')).ok).toBe(false);
    expect(gateway.hasher.verifiedAgainst).toEqual([AFTER, AFTER]);

    // Already current: the next successful login leaves the hash alone.
    expect((await gateway.login.login(EMAIL, PASSWORD, '192.0.2.1')).ok).toBe(true);
    expect((await store.findAdminByEmail(EMAIL))!.passwordHash).toBe(stored);
    expect(gateway.errors).toEqual([]);
  });

  it('a replica started later reads the upgraded hashes for its decoy', async () => {
    const later = start(store, AFTER);
    expect((await later.login.login('someone-else@example.test', 'x', '192.0.2.9')).ok).toBe(false);
    expect(later.hasher.verifiedAgainst).toEqual([AFTER]);
  });
});
