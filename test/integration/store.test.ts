import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openEmbedded } from '../../src/store/embedded.ts';
import { migrate } from '../../src/store/migrate.ts';
import { migrations } from '../../src/store/migrations/index.ts';
import { openStore } from '../../src/store/open.ts';
import { connectPostgres } from '../../src/store/postgres.ts';
import type { SqlExecutor } from '../../src/store/sql.ts';
import type { NewApiKey, Store } from '../../src/store/store.ts';
import { createTestDatabase, describeWithPostgres, postgresUrl } from '../support/services.ts';

/** Where one test's store lives: opened, reopened and finally thrown away. */
interface Place {
  open(): Promise<Store>;
  /** The raw executor on the same database, to look under the store. */
  executor(): Promise<SqlExecutor>;
  dispose(): Promise<void>;
}

const targets: { kind: Store['kind']; available: boolean; place(): Promise<Place> }[] = [
  {
    kind: 'embedded',
    available: true,
    async place() {
      const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-store-'));
      await cp(await embeddedTemplate(), dataDir, { recursive: true });
      return {
        open: () => openStore({ dataDir }),
        executor: () => openEmbedded(join(dataDir, 'pglite')),
        dispose: () => rm(dataDir, { recursive: true, force: true }),
      };
    },
  },
  {
    kind: 'postgres',
    available: postgresUrl() !== null,
    async place() {
      const database = await createTestDatabase();
      return {
        open: () => openStore({ databaseUrl: database.url, dataDir: 'unused', poolSize: 10 }),
        executor: () => connectPostgres(database.url, 2),
        dispose: () => database.drop(),
      };
    },
  },
];

// A fresh PGlite costs ~2 s of initdb; a copy of one migrated directory costs ~0.3 s. The
// template itself is the test of migrating an empty directory.
let template: Promise<string> | undefined;
function embeddedTemplate(): Promise<string> {
  template ??= (async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-template-'));
    await (await openStore({ dataDir })).close();
    return dataDir;
  })();
  return template;
}

afterAll(async () => {
  if (template) await rm(await template, { recursive: true, force: true });
});

const now = new Date('2030-01-01T00:00:00.000Z');
const later = (seconds: number) => new Date(now.getTime() + seconds * 1000);

function newKey(prefix: string, overrides: Partial<NewApiKey> = {}): NewApiKey {
  return { name: `key ${prefix}`, agentId: null, keyPrefix: prefix, keyHash: `hash-${prefix}`, scopes: ['events:write'], expiresAt: null, ...overrides };
}

async function createKey(store: Store, prefix: string, overrides: Partial<NewApiKey> = {}) {
  const result = await store.createApiKey(newKey(prefix, overrides), null, now);
  if (!result.ok) throw new Error(`createApiKey failed: ${result.reason}`);
  return result.key;
}

for (const target of targets) {
  describe.skipIf(!target.available)(`store: ${target.kind}`, () => {
    let place: Place;
    let store: Store;

    beforeEach(async () => {
      place = await target.place();
      store = await place.open();
    });

    afterEach(async () => {
      await store.close();
      await place.dispose();
    });

    it('reports its kind and answers ping', async () => {
      expect(store.kind).toBe(target.kind);
      await expect(store.ping()).resolves.toBeUndefined();
    });

    describe('admins', () => {
      it('creates an admin, storing the email lowercased', async () => {
        const { admin, created } = await store.createAdmin('Ops@Example.COM', 'hash-1');
        expect(created).toBe(true);
        expect(admin).toMatchObject({ email: 'ops@example.com', passwordHash: 'hash-1' });
        expect(admin.id).toBeTypeOf('number');
        expect(admin.createdAt).toBeInstanceOf(Date);
        expect(await store.findAdminById(admin.id)).toEqual(admin);
        expect(await store.countAdmins()).toBe(1);
      });

      it('finds by email case-insensitively and never overwrites an existing admin', async () => {
        const first = await store.createAdmin('ops@example.com', 'hash-1');
        const second = await store.createAdmin('OPS@example.com', 'hash-2');
        expect(second).toEqual({ admin: first.admin, created: false });
        expect(await store.findAdminByEmail('Ops@Example.Com')).toEqual(first.admin);
        expect(await store.listAdmins()).toEqual([first.admin]);
      });

      it('changes a password, and returns null for unknown admins', async () => {
        const { admin } = await store.createAdmin('ops@example.com', 'hash-1');
        await store.setAdminPassword(admin.id, 'hash-2');
        expect((await store.findAdminById(admin.id))?.passwordHash).toBe('hash-2');
        expect(await store.findAdminById(admin.id + 1)).toBeNull();
        expect(await store.findAdminByEmail('nobody@example.com')).toBeNull();
      });

      it('replaces a password hash only while it is still the expected one (a rehash never undoes a password change)', async () => {
        const { admin } = await store.createAdmin('ops@example.com', 'hash-1');
        expect(await store.replaceAdminPasswordHash(admin.id, 'hash-1', 'hash-1-rehashed')).toBe(true);
        expect((await store.findAdminById(admin.id))?.passwordHash).toBe('hash-1-rehashed');
        await store.setAdminPassword(admin.id, 'hash-2');
        expect(await store.replaceAdminPasswordHash(admin.id, 'hash-1-rehashed', 'stale-rehash')).toBe(false);
        expect((await store.findAdminById(admin.id))?.passwordHash).toBe('hash-2');
        expect(await store.replaceAdminPasswordHash(admin.id + 1, 'hash-2', 'x')).toBe(false);
      });
    });

    it('getOrCreateSetting: concurrent candidates all get the one stored value', async () => {
      const values = await Promise.all(Array.from({ length: 20 }, (_, i) => store.getOrCreateSetting('jwt_secret', `candidate-${i}`)));
      expect(new Set(values).size).toBe(1);
      expect(values[0]).toMatch(/^candidate-\d+$/);
      expect(await store.getOrCreateSetting('jwt_secret', 'late')).toBe(values[0]);
    });

    describe('api keys', () => {
      it('creates, lists in id order, and finds by id and by prefix', async () => {
        const a = await createKey(store, 'gh_aaaaaaaaa', { agentId: 42, scopes: ['mcp:calls', 'mcp:knowledge'], expiresAt: later(3600) });
        const b = await createKey(store, 'gh_bbbbbbbbb');
        expect(a).toEqual({
          id: expect.any(Number),
          name: 'key gh_aaaaaaaaa',
          agentId: 42,
          keyPrefix: 'gh_aaaaaaaaa',
          keyHash: 'hash-gh_aaaaaaaaa',
          scopes: ['mcp:calls', 'mcp:knowledge'],
          createdAt: now,
          lastUsedAt: null,
          expiresAt: later(3600),
          revokedAt: null,
        });
        expect(b.id).toBeGreaterThan(a.id);
        expect(await store.listApiKeys()).toEqual([a, b]);
        expect(await store.findApiKeyById(b.id)).toEqual(b);
        expect(await store.findApiKeyByPrefix('gh_aaaaaaaaa')).toEqual(a);
        expect(await store.findApiKeyByPrefix('gh_zzzzzzzzz')).toBeNull();
        expect(await store.findApiKeyById(b.id + 100)).toBeNull();
      });

      it('refuses a taken prefix with prefix_taken and stores nothing', async () => {
        const first = await createKey(store, 'gh_same00000');
        const again = await store.createApiKey(newKey('gh_same00000', { name: 'other' }), null, now);
        expect(again).toEqual({ ok: false, reason: 'prefix_taken' });
        expect(await store.listApiKeys()).toEqual([first]);
      });

      it('revokes once: a second revoke keeps the first revoked_at', async () => {
        const key = await createKey(store, 'gh_revoke000');
        const revoked = await store.revokeApiKey(key.id, later(10));
        expect(revoked).toEqual({ ...key, revokedAt: later(10) });
        expect(await store.revokeApiKey(key.id, later(20))).toEqual(revoked);
        expect(await store.findApiKeyById(key.id)).toEqual(revoked);
        expect(await store.revokeApiKey(key.id + 100, now)).toBeNull();
      });

      it('records a batch of uses and never moves last_used_at backwards', async () => {
        const a = await createKey(store, 'gh_use_a0000');
        const b = await createKey(store, 'gh_use_b0000');
        const c = await createKey(store, 'gh_use_c0000');
        await store.recordKeyUses(new Map([[a.id, later(10)], [b.id, later(20)], [c.id + 100, later(5)]]));
        await store.recordKeyUses(new Map([[a.id, later(5)], [b.id, later(30)]]));
        await store.recordKeyUses(new Map());
        const byId = new Map((await store.listApiKeys()).map((key) => [key.id, key.lastUsedAt]));
        expect(byId).toEqual(new Map([[a.id, later(10)], [b.id, later(30)], [c.id, null]]));
      });

      it('rewrites last_used_at in place: rounds of usage writes do not grow the table', async () => {
        // The write-behind rewrites every used key's row every few seconds; PGlite has no
        // autovacuum, so a table whose updates leave their pages grows without end (fillfactor).
        const keys: Awaited<ReturnType<typeof createKey>>[] = [];
        for (let i = 0; i < 500; i++) keys.push(await createKey(store, `gh_fill${String(i).padStart(5, '0')}`));
        const writeRounds = async (from: number, count: number) => {
          for (let round = from; round < from + count; round++) {
            await store.recordKeyUses(new Map(keys.map((key) => [key.id, later(round + 1)])));
          }
        };
        const underTheStore = async () => {
          await store.close();
          const db = await place.executor();
          try {
            const [row] = await db.query<{ size: string; options: string[] | null }>(
              `SELECT pg_total_relation_size('api_keys')::text AS size, reloptions AS options FROM pg_class WHERE relname = 'api_keys'`,
            );
            return { size: Number(row!.size), options: row!.options };
          } finally {
            await db.close();
            store = await place.open();
          }
        };
        await writeRounds(0, 3);
        const settled = await underTheStore();
        expect(settled.options).toContain('fillfactor=70');
        await writeRounds(3, 12);
        const after = await underTheStore();
        expect(after.size).toBeLessThanOrEqual(settled.size * 1.1);
        expect((await store.listApiKeys()).every((key) => key.lastUsedAt?.getTime() === later(15).getTime())).toBe(true);
      });

      it('counts keys by status at a given time', async () => {
        await createKey(store, 'gh_active000');
        await createKey(store, 'gh_future000', { expiresAt: later(60) });
        await createKey(store, 'gh_expired00', { expiresAt: later(-1) });
        await createKey(store, 'gh_boundary0', { expiresAt: now });
        const revoked = await createKey(store, 'gh_revoked00', { expiresAt: later(-1) });
        await store.revokeApiKey(revoked.id, now);
        expect(await store.countKeysByStatus(now)).toEqual({ active: 2, expired: 2, revoked: 1 });
        expect(await store.countKeysByStatus(later(60))).toEqual({ active: 1, expired: 3, revoked: 1 });
      });
    });

    describe('licence cap', () => {
      it('holds under 50 concurrent creates: exactly the limit is created', async () => {
        const results = await Promise.all(
          Array.from({ length: 50 }, (_, i) => store.createApiKey(newKey(`gh_cap${String(i).padStart(6, '0')}`), 7, now)),
        );
        expect(results.filter((r) => r.ok)).toHaveLength(7);
        expect(results.filter((r) => !r.ok && r.reason === 'license_limit')).toHaveLength(43);
        expect(await store.listApiKeys()).toHaveLength(7);
      });

      it('does not count revoked or expired keys, and a null limit means no cap', async () => {
        const revoked = await createKey(store, 'gh_revoked00');
        await store.revokeApiKey(revoked.id, now);
        await createKey(store, 'gh_expired00', { expiresAt: now });
        await createKey(store, 'gh_live00000');
        expect(await store.createApiKey(newKey('gh_second000'), 2, now)).toMatchObject({ ok: true });
        expect(await store.createApiKey(newKey('gh_third0000'), 2, now)).toEqual({ ok: false, reason: 'license_limit' });
        expect(await store.createApiKey(newKey('gh_third0000'), 0, now)).toEqual({ ok: false, reason: 'license_limit' });
        expect(await store.createApiKey(newKey('gh_third0000'), null, now)).toMatchObject({ ok: true });
        expect(await store.listApiKeys()).toHaveLength(5);
      });
    });

    it('appends audit events and lists them newest first, paging with before', async () => {
      const first = await store.appendAuditEvent({
        action: 'api_key.created',
        actorKind: 'admin',
        actorId: '1',
        subjectId: '7',
        clientAddress: '203.0.113.9',
        detail: { scopes: ['events:write'], nested: { n: 1 } },
        at: now,
      });
      expect(first).toEqual({
        id: expect.any(Number),
        at: now,
        action: 'api_key.created',
        actorKind: 'admin',
        actorId: '1',
        subjectId: '7',
        clientAddress: '203.0.113.9',
        detail: { scopes: ['events:write'], nested: { n: 1 } },
      });
      const rest = [];
      for (let i = 0; i < 4; i++) {
        rest.push(await store.appendAuditEvent({ action: `event.${i}`, actorKind: null, actorId: null, subjectId: null, clientAddress: null, detail: {} }));
      }
      expect(rest[0]?.at).toBeInstanceOf(Date);
      const all = [first, ...rest].toReversed();
      expect(await store.listAuditEvents({ limit: 100 })).toEqual(all);
      const page1 = await store.listAuditEvents({ limit: 2 });
      expect(page1).toEqual(all.slice(0, 2));
      const page2 = await store.listAuditEvents({ limit: 2, before: page1[1]?.id });
      expect(page2).toEqual(all.slice(2, 4));
      expect(await store.listAuditEvents({ limit: 2, before: first.id })).toEqual([]);
    });

    it('keeps everything across close and reopen, and reopening migrates nothing', async () => {
      const { admin } = await store.createAdmin('ops@example.com', 'hash-1');
      const key = await createKey(store, 'gh_persist00');
      const event = await store.appendAuditEvent({ action: 'x', actorKind: null, actorId: null, subjectId: null, clientAddress: null, detail: { a: 1 } });
      const secret = await store.getOrCreateSetting('jwt_secret', 'first');
      await store.close();

      const db = await place.executor();
      try {
        expect(await migrate(db)).toEqual([]);
        const rows = await db.query<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version');
        expect(rows).toEqual(migrations.map(({ version, name }) => ({ version, name })));
      } finally {
        await db.close();
      }

      store = await place.open();
      expect(await store.listAdmins()).toEqual([admin]);
      expect(await store.listApiKeys()).toEqual([key]);
      expect(await store.listAuditEvents({ limit: 10 })).toEqual([event]);
      expect(await store.getOrCreateSetting('jwt_secret', 'second')).toBe(secret);
    });
  });
}

describeWithPostgres('store: postgres only', () => {
  it('migrates safely when several replicas start at once', async () => {
    const database = await createTestDatabase();
    try {
      const stores = await Promise.all(
        Array.from({ length: 4 }, () => openStore({ databaseUrl: database.url, dataDir: 'unused', poolSize: 2 })),
      );
      expect(await stores[0]?.countAdmins()).toBe(0);
      await Promise.all(stores.map((s) => s.close()));
    } finally {
      await database.drop();
    }
  });
});

describe('store: connection failures', () => {
  it('rejects without showing the password from DATABASE_URL', async () => {
    const attempt = openStore({ databaseUrl: 'postgres://gatehouse:s3cret-pa55@127.0.0.1:1/gatehouse', dataDir: 'unused' });
    await expect(attempt).rejects.toThrow(/cannot connect to PostgreSQL/);
    const error: unknown = await attempt.catch((e: unknown) => e);
    expect(String((error as Error).message)).not.toContain('s3cret-pa55');
  });

  it('rejects an unparsable DATABASE_URL without echoing it', async () => {
    const attempt = openStore({ databaseUrl: 'postgres://gatehouse:s3cret-pa55@[bad', dataDir: 'unused' });
    await expect(attempt).rejects.toThrow(/not a valid/);
    const error: unknown = await attempt.catch((e: unknown) => e);
    expect(String((error as Error).message)).not.toContain('s3cret-pa55');
  });
});
