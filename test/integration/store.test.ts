import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EMBEDDED_STORE_FILE, openEmbeddedDatabase } from '../../src/store/embedded.ts';
import { migrate } from '../../src/store/migrate.ts';
import { migrations } from '../../src/store/migrations/index.ts';
import { openStore } from '../../src/store/open.ts';
import { connectPostgres } from '../../src/store/postgres.ts';
import { migrateSqlite } from '../../src/store/sqlite/migrate.ts';
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts';
import { StoreNotEmptyError, type AuditOf, type NewApiKey, type Store, type StoreData } from '../../src/store/store.ts';
import { createTestDatabase, describeWithPostgres, postgresUrl } from '../support/services.ts';

interface Migrations {
  /** Versions a second run of the migrations applied. */
  applied: number[];
  /** What `schema_migrations` records, and what the store's own migrations list. */
  recorded: { version: number; name: string }[];
  expected: { version: number; name: string }[];
}

/** Where one test's store lives: opened, reopened, looked under, and finally thrown away. */
interface Place {
  open(): Promise<Store>;
  /** Bytes the api_keys table occupies (PostgreSQL) or the file and its WAL (SQLite), beside the open store. */
  footprint(): Promise<number>;
  /** Runs the migrations again on the closed store, under it. */
  remigrate(): Promise<Migrations>;
  dispose(): Promise<void>;
}

const versions = (list: readonly { version: number; name: string }[]) => list.map(({ version, name }) => ({ version, name }));

async function bytes(path: string): Promise<number> {
  return (await stat(path).catch(() => ({ size: 0 }))).size;
}

const targets: { kind: Store['kind']; available: boolean; place(): Promise<Place> }[] = [
  {
    kind: 'embedded',
    available: true,
    async place() {
      const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-store-'));
      const file = join(dataDir, EMBEDDED_STORE_FILE);
      return {
        open: () => openStore({ dataDir }),
        footprint: async () => (await bytes(file)) + (await bytes(`${file}-wal`)),
        async remigrate() {
          const { db, release } = openEmbeddedDatabase(dataDir);
          try {
            const applied = migrateSqlite(db);
            const recorded = db.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all() as unknown as Migrations['recorded'];
            return { applied, recorded: versions(recorded), expected: versions(sqliteMigrations) };
          } finally {
            db.close();
            release();
          }
        },
        dispose: () => rm(dataDir, { recursive: true, force: true }),
      };
    },
  },
  {
    kind: 'postgres',
    available: postgresUrl() !== null,
    async place() {
      const database = await createTestDatabase();
      const onDatabase = async <T>(fn: (db: Awaited<ReturnType<typeof connectPostgres>>) => Promise<T>) => {
        const db = await connectPostgres(database.url, 1);
        try {
          return await fn(db);
        } finally {
          await db.close();
        }
      };
      return {
        open: () => openStore({ databaseUrl: database.url, dataDir: 'unused', poolSize: 10 }),
        footprint: () =>
          onDatabase(async (db) => Number((await db.query<{ size: string }>(`SELECT pg_total_relation_size('api_keys')::text AS size`))[0]!.size)),
        remigrate: () =>
          onDatabase(async (db) => ({
            applied: await migrate(db),
            recorded: await db.query<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version'),
            expected: versions(migrations),
          })),
        dispose: () => database.drop(),
      };
    },
  },
];

const now = new Date('2030-01-01T00:00:00.000Z');
const later = (seconds: number) => new Date(now.getTime() + seconds * 1000);

/** An audit factory that records the row's id and one field of it, as the services' do. */
function eventOf<T extends { id: number }>(action: string): AuditOf<T> {
  return (row) => ({
    action,
    actorKind: 'admin',
    actorId: '1',
    subjectId: String(row.id),
    clientAddress: '203.0.113.9',
    detail:
      'passwordHash' in row ? { hash: row.passwordHash } : 'revokedAt' in row && row.revokedAt instanceof Date ? { revokedAt: row.revokedAt.toISOString() } : {},
  });
}

function plainEvent(action: string) {
  return { action, actorKind: null, actorId: null, subjectId: null, clientAddress: null, detail: {} };
}

/** Admins, keys in every state, audit events and settings; returns the store's export. */
async function populate(store: Store): Promise<StoreData> {
  const { admin } = await store.createAdmin('ops@example.com', 'hash-1', eventOf('admin.created'));
  await store.createAdmin('second@example.com', 'hash-2');
  const live = await store.createApiKey(newKey('gh_export_a0', { agentId: 7, scopes: ['mcp:calls', 'events:write'], expiresAt: later(3600) }), null, now, eventOf('api_key.created'));
  const revoked = await createKey(store, 'gh_export_b0');
  await createKey(store, 'gh_export_c0', { expiresAt: later(-60) });
  await store.revokeApiKey(revoked.id, later(5), eventOf('api_key.revoked'));
  if (live.ok) await store.recordKeyUses(new Map([[live.key.id, later(7)]]));
  await store.appendAuditEvent({ ...plainEvent('admin.login'), actorKind: 'admin', actorId: String(admin.id), detail: { nested: { list: [1, 'two', null] } }, at: later(8) });
  await store.getOrCreateSetting('jwt_secret', 'secret-1');
  await store.getOrCreateSetting('other', 'value-2');
  return store.exportData();
}

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
          enabled: true,
          updatedAt: now,
          rateLimit: null,
          rotatedFrom: null,
          rotatedTo: null,
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

      it('rewrites last_used_at in place: rounds of usage writes for 2,000 keys stop growing the store', async () => {
        // The write-behind rewrites every used key's row every few seconds, without end. On
        // PostgreSQL a table whose updates leave their pages grows (fillfactor, ADR 0006); on
        // SQLite the rows are rewritten in place, and the WAL is reused after each checkpoint.
        const keys: Awaited<ReturnType<typeof createKey>>[] = [];
        for (let i = 0; i < 2_000; i++) keys.push(await createKey(store, `gh_fill${String(i).padStart(5, '0')}`));
        let round = 0;
        /** The largest footprint seen after each of `count` rounds. */
        const peakOver = async (count: number) => {
          let peak = 0;
          for (const end = round + count; round < end; round++) {
            await store.recordKeyUses(new Map(keys.map((key) => [key.id, later(round + 1)])));
            peak = Math.max(peak, await place.footprint());
          }
          return peak;
        };
        // Long enough for SQLite's WAL to reach its checkpoint (1,000 pages) and start over.
        const settled = await peakOver(40);
        const after = await peakOver(40);
        expect(after).toBeLessThanOrEqual(settled * 1.1);
        expect((await store.listApiKeys()).every((key) => key.lastUsedAt?.getTime() === later(round).getTime())).toBe(true);
      });

      it('counts keys by status at a given time', async () => {
        await createKey(store, 'gh_active000');
        await createKey(store, 'gh_future000', { expiresAt: later(60) });
        await createKey(store, 'gh_expired00', { expiresAt: later(-1) });
        await createKey(store, 'gh_boundary0', { expiresAt: now });
        const revoked = await createKey(store, 'gh_revoked00', { expiresAt: later(-1) });
        await store.revokeApiKey(revoked.id, now);
        expect(await store.countKeysByStatus(now)).toEqual({ active: 2, disabled: 0, expired: 2, revoked: 1 });
        expect(await store.countKeysByStatus(later(60))).toEqual({ active: 1, disabled: 0, expired: 3, revoked: 1 });
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

    describe('a change and its audit event, in one transaction', () => {
      it('writes the event a change makes from its row, and none when nothing changed', async () => {
        const { admin } = await store.createAdmin('ops@example.com', 'hash-1', eventOf('admin.created'));
        await store.createAdmin('OPS@example.com', 'hash-x', eventOf('admin.created'));
        await store.setAdminPassword(admin.id, 'hash-2', eventOf('admin.password_changed'));
        await store.setAdminPassword(admin.id + 100, 'hash-3', eventOf('admin.password_changed'));
        const key = await createKey(store, 'gh_audited0');
        const created = await store.createApiKey(newKey('gh_audited1'), null, now, eventOf('api_key.created'));
        expect(await store.createApiKey(newKey('gh_audited1'), null, now, eventOf('api_key.created'))).toEqual({ ok: false, reason: 'prefix_taken' });
        expect(await store.createApiKey(newKey('gh_audited2'), 2, now, eventOf('api_key.created'))).toEqual({ ok: false, reason: 'license_limit' });
        await store.revokeApiKey(key.id, later(1), eventOf('api_key.revoked'));
        await store.revokeApiKey(key.id, later(2), eventOf('api_key.revoked'));
        await store.revokeApiKey(key.id + 100, later(3), eventOf('api_key.revoked'));
        if (!created.ok) throw new Error(created.reason);

        const events = (await store.listAuditEvents({ limit: 100 })).toReversed();
        expect(events.map((event) => [event.action, event.subjectId])).toEqual([
          ['admin.created', String(admin.id)],
          ['admin.password_changed', String(admin.id)],
          ['api_key.created', String(created.key.id)],
          ['api_key.revoked', String(key.id)],
          ['api_key.revoked', String(key.id)],
        ]);
        // Each event was made from the row as the change wrote it.
        expect(events[1]?.detail).toEqual({ hash: 'hash-2' });
        expect(events[3]?.detail).toEqual({ revokedAt: later(1).toISOString() });
        expect(events[4]?.detail).toEqual({ revokedAt: later(1).toISOString() });
      });

      it('keeps neither the change nor its event when the event cannot be made', async () => {
        const failing = (): never => {
          throw new Error('no event');
        };
        await expect(store.createAdmin('ops@example.com', 'hash-1', failing)).rejects.toThrow('no event');
        expect(await store.listAdmins()).toEqual([]);
        const { admin } = await store.createAdmin('ops@example.com', 'hash-1');
        await expect(store.setAdminPassword(admin.id, 'hash-2', failing)).rejects.toThrow('no event');
        expect((await store.findAdminById(admin.id))?.passwordHash).toBe('hash-1');
        await expect(store.createApiKey(newKey('gh_nothing00'), null, now, failing)).rejects.toThrow('no event');
        expect(await store.listApiKeys()).toEqual([]);
        const key = await createKey(store, 'gh_kept00000');
        await expect(store.revokeApiKey(key.id, now, failing)).rejects.toThrow('no event');
        expect(await store.findApiKeyById(key.id)).toEqual(key);
        expect(await store.listAuditEvents({ limit: 10 })).toEqual([]);
        // The store is usable after the rollbacks.
        expect(await store.createApiKey(newKey('gh_after0000'), null, now, eventOf('api_key.created'))).toMatchObject({ ok: true });
        expect(await store.listAuditEvents({ limit: 10 })).toHaveLength(1);
      });
    });

    describe('export and import', () => {
      let other: Place | undefined;
      afterEach(async () => {
        await other?.dispose();
        other = undefined;
      });
      /** A second, empty store of the same kind. */
      const emptyStore = async () => {
        other = await target.place();
        return other.open();
      };

      it('round-trips everything with its ids, and the next ids continue after the imported ones', async () => {
        const data = await populate(store);
        expect(data.admins).toHaveLength(2);
        expect(data.apiKeys).toHaveLength(3);
        expect(data.settings).toEqual([{ name: 'jwt_secret', value: 'secret-1' }, { name: 'other', value: 'value-2' }]);

        const copy = await emptyStore();
        try {
          await copy.importData(data);
          expect(await copy.exportData()).toEqual(data);
          const maxId = (rows: { id: number }[]) => Math.max(...rows.map((row) => row.id));
          expect((await createKey(copy, 'gh_next00000')).id).toBeGreaterThan(maxId(data.apiKeys));
          expect((await copy.createAdmin('next@example.com', 'hash')).admin.id).toBeGreaterThan(maxId(data.admins));
          expect((await copy.appendAuditEvent(plainEvent('next'))).id).toBeGreaterThan(maxId(data.auditEvents));
        } finally {
          await copy.close();
        }
      });

      it('keeps ids with gaps as they are', async () => {
        const copy = await emptyStore();
        try {
          const data = await populate(store);
          const spaced: StoreData = { ...data, apiKeys: data.apiKeys.map((key, i) => ({ ...key, id: 10 + i * 5 })) };
          await copy.importData(spaced);
          expect((await copy.listApiKeys()).map((key) => key.id)).toEqual([10, 15, 20]);
          expect((await createKey(copy, 'gh_next00000')).id).toBeGreaterThan(20);
        } finally {
          await copy.close();
        }
      });

      it('refuses a store that holds anything, and writes nothing', async () => {
        const data = await populate(store);
        const copy = await emptyStore();
        try {
          await copy.getOrCreateSetting('jwt_secret', 'already here');
          const before = await copy.exportData();
          const refused: unknown = await copy.importData(data).catch((error: unknown) => error);
          expect(refused).toBeInstanceOf(StoreNotEmptyError);
          expect((refused as Error).message).toMatch(/not empty .*setting/);
          expect(await copy.exportData()).toEqual(before);
        } finally {
          await copy.close();
        }
      });

      it('leaves the store as it was when the import fails half-way', async () => {
        const data = await populate(store);
        const copy = await emptyStore();
        try {
          const clash = { ...data.apiKeys[1]!, id: 999 };
          await expect(copy.importData({ ...data, apiKeys: [...data.apiKeys, clash] })).rejects.toThrow();
          expect(await copy.exportData()).toEqual({ admins: [], apiKeys: [], auditEvents: [], settings: [] });
          await copy.importData(data);
          expect(await copy.exportData()).toEqual(data);
        } finally {
          await copy.close();
        }
      });
    });

    it('keeps everything across close and reopen, and reopening migrates nothing', async () => {
      const { admin } = await store.createAdmin('ops@example.com', 'hash-1');
      const key = await createKey(store, 'gh_persist00');
      const event = await store.appendAuditEvent({ action: 'x', actorKind: null, actorId: null, subjectId: null, clientAddress: null, detail: { a: 1 } });
      const secret = await store.getOrCreateSetting('jwt_secret', 'first');
      await store.close();

      const again = await place.remigrate();
      expect(again.applied).toEqual([]);
      expect(again.recorded).toEqual(again.expected);

      store = await place.open();
      expect(await store.listAdmins()).toEqual([admin]);
      expect(await store.listApiKeys()).toEqual([key]);
      expect(await store.listAuditEvents({ limit: 10 })).toEqual([event]);
      expect(await store.getOrCreateSetting('jwt_secret', 'second')).toBe(secret);
    });
  });
}

describeWithPostgres('store: postgres only', () => {
  it('keeps api_keys at fillfactor 70, so last_used_at updates stay on their page (ADR 0006)', async () => {
    const database = await createTestDatabase();
    try {
      await (await openStore({ databaseUrl: database.url, dataDir: 'unused', poolSize: 1 })).close();
      const db = await connectPostgres(database.url, 1);
      try {
        const [row] = await db.query<{ options: string[] | null }>(`SELECT reloptions AS options FROM pg_class WHERE relname = 'api_keys'`);
        expect(row?.options).toContain('fillfactor=70');
      } finally {
        await db.close();
      }
    } finally {
      await database.drop();
    }
  });

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
