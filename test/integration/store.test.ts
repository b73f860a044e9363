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
import { changedFields } from '../../src/store/key-lifecycle.ts';
import {
  StoreNotEmptyError,
  type AdminRow,
  type AdminSessionRow,
  type ApiKeyPatch,
  type ApiKeyRow,
  type AuditOf,
  type AuditOfUpdate,
  type NewApiKey,
  type NewAuditEvent,
  type Store,
  type StoreData,
} from '../../src/store/store.ts';
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
  const { admin: second } = await store.createAdmin('second@example.com', 'hash-2');
  // Admin sessions: a live one, an ended one (its token refused on the copy too), another admin's.
  await store.createAdminSession({ id: 'sess-live', adminId: admin.id, createdAt: later(1), expiresAt: later(3600), clientAddress: '203.0.113.7', endedAt: null });
  await store.createAdminSession({ id: 'sess-ended', adminId: admin.id, createdAt: later(2), expiresAt: later(3600), clientAddress: '203.0.113.8', endedAt: null });
  await store.createAdminSession({ id: 'sess-second', adminId: second.id, createdAt: later(2), expiresAt: later(600), clientAddress: null, endedAt: null });
  await store.endAdminSessions({ adminId: admin.id, id: 'sess-ended' }, later(6), (row) => ({ ...plainEvent('session_ended'), detail: { session_id: row.id }, at: later(6) }));
  const live = await store.createApiKey(newKey('gh_export_a0', { agentId: 7, scopes: ['mcp:calls', 'events:write'], expiresAt: later(3600) }), null, now, eventOf('api_key.created'));
  const revoked = await createKey(store, 'gh_export_b0');
  await createKey(store, 'gh_export_c0', { expiresAt: later(-60) });
  // The lifecycle's columns: disabled with a rate limit, and a rotation's two keys.
  const disabled = await createKey(store, 'gh_export_d0', { agentId: 3 });
  await store.updateApiKey(disabled.id, { enabled: false, rateLimit: { requests: 5, perSeconds: 60 } }, { now: later(3), limit: null, audit: updateEvent });
  const replaced = await createKey(store, 'gh_export_e0', { scopes: ['mcp:calls'] });
  await store.rotateApiKey(replaced.id, { keyPrefix: 'gh_export_f0', keyHash: 'hash-gh_export_f0' }, { now: later(4), graceMs: 3_600_000, audit: rotateEvent });
  await store.revokeApiKey(revoked.id, later(5), eventOf('api_key.revoked'));
  if (live.ok) await store.recordKeyUses(new Map([[live.key.id, later(7)]]));
  await store.appendAuditEvent({ ...plainEvent('admin.login'), actorKind: 'admin', actorId: String(admin.id), detail: { nested: { list: [1, 'two', null] } }, at: later(8) });
  await store.getOrCreateSetting('jwt_secret', 'secret-1');
  await store.getOrCreateSetting('other', 'value-2');
  return store.exportData();
}

/** An update's events as the service makes them: one, naming the fields that changed, from the rows written. */
const updateEvent: AuditOfUpdate = (before, after) => [
  { action: 'key_updated', actorKind: 'admin', actorId: '1', subjectId: String(after.id), clientAddress: null, detail: { fields: changedFields(before, after), name: after.name } },
];

/** A rotation's event, from the two rows as written. */
function rotateEvent(old: ApiKeyRow, next: ApiKeyRow): NewAuditEvent {
  return { action: 'key_rotated', actorKind: 'admin', actorId: '1', subjectId: String(old.id), clientAddress: null, detail: { from: old.id, to: next.id, oldExpiresAt: old.expiresAt?.toISOString() ?? null } };
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

    describe('key lifecycle: updateApiKey', () => {
      const at = later(10);
      const update = (id: number, patch: ApiKeyPatch, options: { now?: Date; limit?: number | null; audit?: AuditOfUpdate } = {}) =>
        store.updateApiKey(id, patch, { now: options.now ?? at, limit: options.limit ?? null, audit: options.audit ?? updateEvent });
      const updated = async (id: number, patch: ApiKeyPatch, options: { now?: Date; limit?: number | null } = {}) => {
        const result = await update(id, patch, options);
        if (!result.ok) throw new Error(`updateApiKey refused: ${result.reason}`);
        return result;
      };

      it('changes each field alone, stamps updated_at, and leaves everything else as it was', async () => {
        const key = await createKey(store, 'gh_upd_each0', { agentId: 7, scopes: ['events:write'], expiresAt: later(3600) });
        await store.recordKeyUses(new Map([[key.id, later(1)]]));
        const used = (await store.findApiKeyById(key.id))!;
        const steps: Array<[ApiKeyPatch, Partial<ApiKeyRow>]> = [
          [{ name: 'renamed' }, { name: 'renamed' }],
          [{ scopes: ['mcp:calls', 'events:write'] }, { scopes: ['mcp:calls', 'events:write'] }],
          [{ agentId: 9 }, { agentId: 9 }],
          [{ expiresAt: later(7200) }, { expiresAt: later(7200) }],
          [{ enabled: false }, { enabled: false }],
          [{ rateLimit: { requests: 10, perSeconds: 60 } }, { rateLimit: { requests: 10, perSeconds: 60 } }],
          [{ enabled: true }, { enabled: true }],
        ];
        let current = used;
        for (const [index, [patch, fields]] of steps.entries()) {
          const when = later(10 + index);
          const result = await updated(key.id, patch, { now: when });
          const expected = { ...current, ...fields, updatedAt: when };
          expect(result, JSON.stringify(patch)).toEqual({ ok: true, key: expected, before: current });
          expect(await store.findApiKeyById(key.id)).toEqual(expected);
          current = expected;
        }
        expect(current).toMatchObject({ id: key.id, keyPrefix: key.keyPrefix, keyHash: key.keyHash, createdAt: now, lastUsedAt: later(1), revokedAt: null, rotatedFrom: null, rotatedTo: null });
      });

      it('null clears the agent, the expiry and the rate limit; several fields change in one update', async () => {
        const created = await store.createApiKey(newKey('gh_upd_null0', { agentId: 4, expiresAt: later(3600), rateLimit: { requests: 1, perSeconds: 1 } }), null, now);
        if (!created.ok) throw new Error(created.reason);
        expect(created.key.rateLimit).toEqual({ requests: 1, perSeconds: 1 });
        const { key } = await updated(created.key.id, { agentId: null, expiresAt: null, rateLimit: null, name: 'cleared', enabled: false });
        expect(key).toEqual({ ...created.key, agentId: null, expiresAt: null, rateLimit: null, name: 'cleared', enabled: false, updatedAt: at });
        expect(await store.findApiKeyById(key.id)).toEqual(key);
      });

      it('an update that changes nothing returns the stored row as it is, and writes neither the row nor an event', async () => {
        const created = await store.createApiKey(newKey('gh_upd_same0', { agentId: 4, scopes: ['events:write', 'mcp:calls'], expiresAt: later(3600), rateLimit: { requests: 3, perSeconds: 9 } }), null, now);
        if (!created.ok) throw new Error(created.reason);
        const key = created.key;
        for (const patch of [
          {},
          { name: key.name, scopes: ['events:write', 'mcp:calls'], agentId: 4, expiresAt: new Date(later(3600).getTime()), enabled: true, rateLimit: { requests: 3, perSeconds: 9 } },
          { enabled: true },
        ] satisfies ApiKeyPatch[]) {
          const result = await update(key.id, patch, { limit: 0 });
          if (!result.ok) throw new Error(result.reason);
          expect(result.key).toBe(result.before);
          expect(result.key).toEqual(key);
        }
        expect(await store.findApiKeyById(key.id)).toEqual(key);
        expect(await store.listAuditEvents({ limit: 10 })).toEqual([]);
      });

      it('refuses a revoked key (revoked) and an unknown one (not_found); a revoked key is never un-revoked', async () => {
        const key = await createKey(store, 'gh_upd_revk0');
        const revoked = (await store.revokeApiKey(key.id, later(5)))!;
        for (const patch of [{ enabled: true }, { name: 'back' }, { expiresAt: null }, { enabled: false }] satisfies ApiKeyPatch[]) {
          expect(await update(key.id, patch)).toEqual({ ok: false, reason: 'revoked' });
        }
        expect(await store.findApiKeyById(key.id)).toEqual(revoked);
        expect(await update(key.id + 100, { name: 'nobody' })).toEqual({ ok: false, reason: 'not_found' });
        expect(await store.listAuditEvents({ limit: 10 })).toEqual([]);
      });

      it('disabled keys count towards the cap of creates; enabling is refused when the other counted keys reach it', async () => {
        const off = await createKey(store, 'gh_cap_off00', { enabled: false });
        expect(off.enabled).toBe(false);
        const on = await createKey(store, 'gh_cap_on000');
        // Two keys counted, the disabled one included.
        expect(await store.createApiKey(newKey('gh_cap_third'), 2, now)).toEqual({ ok: false, reason: 'license_limit' });
        // Within the cap: the other counted key (1) is below 2.
        expect(await update(off.id, { enabled: true }, { limit: 2 })).toMatchObject({ ok: true, key: { enabled: true } });
        expect(await update(off.id, { enabled: false }, { limit: 1 })).toMatchObject({ ok: true, key: { enabled: false } });
        // The cap lowered to 1: the other key already reaches it.
        expect(await update(off.id, { enabled: true, name: 'not applied' }, { limit: 1 })).toEqual({ ok: false, reason: 'license_limit' });
        expect(await store.findApiKeyById(off.id)).toMatchObject({ enabled: false, name: off.name });
        // Other changes of a disabled key, and a key already enabled, are not licence checks.
        expect(await update(off.id, { name: 'still off' }, { limit: 0 })).toMatchObject({ ok: true, key: { enabled: false, name: 'still off' } });
        expect(await update(on.id, { enabled: true, name: 'on' }, { limit: 0 })).toMatchObject({ ok: true, key: { enabled: true, name: 'on' } });
        expect(await update(off.id, { enabled: true }, { limit: null })).toMatchObject({ ok: true, key: { enabled: true } });
        await update(off.id, { enabled: false });
        // Revoked, expired and rotated keys are not counted against an enable.
        await store.revokeApiKey(on.id, at);
        await createKey(store, 'gh_cap_expd0', { expiresAt: later(5) });
        const rotated = await createKey(store, 'gh_cap_rot00');
        expect(await store.rotateApiKey(rotated.id, { keyPrefix: 'gh_cap_rot01', keyHash: 'h' }, { now: at, graceMs: 60_000 })).toMatchObject({ ok: true });
        // Counted: the rotation's new key only.
        expect(await update(off.id, { enabled: true }, { limit: 1 })).toEqual({ ok: false, reason: 'license_limit' });
        expect(await update(off.id, { enabled: true }, { limit: 2 })).toMatchObject({ ok: true, key: { enabled: true } });
      });

      it('a key brought back from expiry by a later expiry counts again, so it is checked against the cap like an enable', async () => {
        const lapsed = await createKey(store, 'gh_cap_lapse', { expiresAt: later(5) });
        await createKey(store, 'gh_cap_live0');
        // At `at` the lapsed key counts for nothing: one key counted, under a cap of 1 no more.
        expect(await store.createApiKey(newKey('gh_cap_more0'), 1, at)).toEqual({ ok: false, reason: 'license_limit' });
        expect(await update(lapsed.id, { expiresAt: later(3600) }, { limit: 1 })).toEqual({ ok: false, reason: 'license_limit' });
        expect(await update(lapsed.id, { expiresAt: null }, { limit: 1 })).toEqual({ ok: false, reason: 'license_limit' });
        expect(await store.findApiKeyById(lapsed.id)).toEqual(lapsed);
        expect(await update(lapsed.id, { expiresAt: later(3600) }, { limit: 2 })).toMatchObject({ ok: true, key: { expiresAt: later(3600) } });
        // A counted key's expiry moves freely at the cap.
        expect(await update(lapsed.id, { expiresAt: null }, { limit: 2 })).toMatchObject({ ok: true, key: { expiresAt: null } });
      });

      it("a rotated key's expiry can only be brought forward; its other fields change freely", async () => {
        const key = await createKey(store, 'gh_upd_rot00', { expiresAt: later(86_400) });
        const rotation = await store.rotateApiKey(key.id, { keyPrefix: 'gh_upd_rot01', keyHash: 'h' }, { now, graceMs: 3_600_000 });
        if (!rotation.ok) throw new Error(rotation.reason);
        expect(rotation.old.expiresAt).toEqual(later(3600));
        expect(await update(key.id, { expiresAt: later(3601) })).toEqual({ ok: false, reason: 'rotated' });
        expect(await update(key.id, { expiresAt: null })).toEqual({ ok: false, reason: 'rotated' });
        expect(await update(key.id, { expiresAt: later(86_400), name: 'not applied' })).toEqual({ ok: false, reason: 'rotated' });
        expect(await store.findApiKeyById(key.id)).toEqual(rotation.old);
        expect(await update(key.id, { expiresAt: later(3600) })).toMatchObject({ ok: true, key: rotation.old });
        expect(await update(key.id, { expiresAt: later(1800), name: 'sooner', enabled: false })).toMatchObject({
          ok: true,
          key: { ...rotation.old, expiresAt: later(1800), name: 'sooner', enabled: false, updatedAt: at },
        });
        expect(await update(key.id, { enabled: true })).toMatchObject({ ok: true, key: { enabled: true, rotatedTo: rotation.key.id } });
      });

      it('writes the events an update makes from its rows in its transaction, and keeps nothing when they cannot be made', async () => {
        const key = await createKey(store, 'gh_upd_audit');
        await update(key.id, { name: 'audited', scopes: ['mcp:calls'] });
        await update(key.id, { name: 'audited' });
        const twoEvents: AuditOfUpdate = (before, after) => [
          { ...plainEvent('key_disabled'), subjectId: String(after.id), detail: { enabled: after.enabled } },
          { ...plainEvent('key_updated'), subjectId: String(before.id), detail: { from: before.name, to: after.name } },
        ];
        await update(key.id, { enabled: false, name: 'twice' }, { audit: twoEvents });
        const events = (await store.listAuditEvents({ limit: 10 })).toReversed();
        expect(events.map(({ action, subjectId, detail }) => ({ action, subjectId, detail }))).toEqual([
          { action: 'key_updated', subjectId: String(key.id), detail: { fields: ['name', 'scopes'], name: 'audited' } },
          { action: 'key_disabled', subjectId: String(key.id), detail: { enabled: false } },
          { action: 'key_updated', subjectId: String(key.id), detail: { from: 'audited', to: 'twice' } },
        ]);
        const stored = await store.findApiKeyById(key.id);
        const failing = (): never => {
          throw new Error('no event');
        };
        await expect(store.updateApiKey(key.id, { name: 'lost', enabled: true }, { now: at, limit: null, audit: failing })).rejects.toThrow('no event');
        expect(await store.findApiKeyById(key.id)).toEqual(stored);
        expect(await store.listAuditEvents({ limit: 10 })).toHaveLength(3);
      });
    });

    describe('key lifecycle: rotateApiKey', () => {
      const at = later(10);
      const rotate = (id: number, prefix: string, graceMs: number, now = at) =>
        store.rotateApiKey(id, { keyPrefix: prefix, keyHash: `hash-${prefix}` }, { now, graceMs, audit: rotateEvent });
      const rotated = async (id: number, prefix: string, graceMs: number, now = at) => {
        const result = await rotate(id, prefix, graceMs, now);
        if (!result.ok) throw new Error(`rotateApiKey refused: ${result.reason}`);
        return result;
      };

      it('the new key copies name, agent, scopes, expiry, enabled and rate limit; the old one ends with its grace period', async () => {
        const created = await store.createApiKey(
          newKey('gh_rot_copy0', { agentId: 7, scopes: ['mcp:calls', 'events:write'], expiresAt: later(86_400), enabled: false, rateLimit: { requests: 4, perSeconds: 2 } }),
          null,
          now,
        );
        if (!created.ok) throw new Error(created.reason);
        const old = created.key;
        await store.recordKeyUses(new Map([[old.id, later(2)]]));
        const result = await rotated(old.id, 'gh_rot_copy1', 60_000);
        expect(result.key).toEqual({
          id: expect.any(Number),
          name: old.name,
          agentId: 7,
          keyPrefix: 'gh_rot_copy1',
          keyHash: 'hash-gh_rot_copy1',
          scopes: ['mcp:calls', 'events:write'],
          createdAt: at,
          lastUsedAt: null,
          expiresAt: later(86_400),
          revokedAt: null,
          enabled: false,
          updatedAt: at,
          rateLimit: { requests: 4, perSeconds: 2 },
          rotatedFrom: old.id,
          rotatedTo: null,
        });
        expect(result.key.id).toBeGreaterThan(old.id);
        expect(result.old).toEqual({ ...old, lastUsedAt: later(2), expiresAt: later(70), rotatedTo: result.key.id, updatedAt: at });
        expect(result.revoked).toEqual([]);
        expect(await store.listApiKeys()).toEqual([result.old, result.key]);
        expect(await store.findApiKeyByPrefix('gh_rot_copy1')).toEqual(result.key);
        const [event] = await store.listAuditEvents({ limit: 10 });
        expect(event).toMatchObject({ action: 'key_rotated', subjectId: String(old.id), detail: { from: old.id, to: result.key.id, oldExpiresAt: later(70).toISOString() } });
      });

      it("the old key's expiry is the sooner of its own and the end of the grace period", async () => {
        const soon = await createKey(store, 'gh_rot_soon0', { expiresAt: later(30) });
        const never = await createKey(store, 'gh_rot_nevr0');
        expect((await rotated(soon.id, 'gh_rot_soon1', 3_600_000)).old.expiresAt).toEqual(later(30));
        expect((await rotated(never.id, 'gh_rot_nevr1', 3_600_000)).old.expiresAt).toEqual(later(10 + 3600));
      });

      it('a grace period of 0 revokes the old key at once, its expiry the moment of the rotation (the earlier of its own and now + 0)', async () => {
        const old = await createKey(store, 'gh_rot_zero0', { expiresAt: later(3600) });
        const result = await rotated(old.id, 'gh_rot_zero1', 0);
        expect(result.old).toEqual({ ...old, revokedAt: at, expiresAt: at, rotatedTo: result.key.id, updatedAt: at });
        expect(result.revoked).toEqual([old.id]);
        expect(await store.findApiKeyById(old.id)).toEqual(result.old);
        expect(result.key).toMatchObject({ revokedAt: null, expiresAt: later(3600), rotatedFrom: old.id });
      });

      it('refuses a revoked, an expired, an already rotated and an unknown key, and a taken prefix, changing nothing', async () => {
        const revoked = await createKey(store, 'gh_rot_revk0');
        await store.revokeApiKey(revoked.id, now);
        const expired = await createKey(store, 'gh_rot_expd0', { expiresAt: at });
        const first = await createKey(store, 'gh_rot_twic0');
        await rotated(first.id, 'gh_rot_twic1', 60_000);
        const taken = await createKey(store, 'gh_rot_take0');
        const before = await store.exportData();
        expect(await rotate(revoked.id, 'gh_rot_new00', 60_000)).toEqual({ ok: false, reason: 'revoked' });
        expect(await rotate(expired.id, 'gh_rot_new00', 60_000)).toEqual({ ok: false, reason: 'expired' });
        expect(await rotate(first.id, 'gh_rot_new00', 60_000)).toEqual({ ok: false, reason: 'rotated' });
        expect(await rotate(first.id, 'gh_rot_new00', 0)).toEqual({ ok: false, reason: 'rotated' });
        expect(await rotate(taken.id + 100, 'gh_rot_new00', 60_000)).toEqual({ ok: false, reason: 'not_found' });
        expect(await rotate(taken.id, 'gh_rot_twic1', 60_000)).toEqual({ ok: false, reason: 'prefix_taken' });
        expect(await store.exportData()).toEqual(before);
        // The refused prefix draw leaves the key rotatable.
        expect(await rotate(taken.id, 'gh_rot_take1', 60_000)).toMatchObject({ ok: true });
      });

      it('rotating a key whose predecessor is still in its grace period revokes the predecessor: never three live keys', async () => {
        const a = await createKey(store, 'gh_chain_a00');
        const toB = await rotated(a.id, 'gh_chain_b00', 3_600_000);
        const toC = await rotated(toB.key.id, 'gh_chain_c00', 3_600_000, later(20));
        expect(toC.revoked).toEqual([a.id]);
        expect(await store.findApiKeyById(a.id)).toEqual({ ...toB.old, revokedAt: later(20), updatedAt: later(20) });
        expect(toC.old).toMatchObject({ id: toB.key.id, revokedAt: null, expiresAt: later(20 + 3600), rotatedFrom: a.id, rotatedTo: toC.key.id });
        expect(toC.key).toMatchObject({ rotatedFrom: toB.key.id, rotatedTo: null });
        const live = (await store.listApiKeys()).filter((key) => key.revokedAt === null && (key.expiresAt === null || key.expiresAt > later(20)));
        expect(live.map((key) => key.id)).toEqual([toB.key.id, toC.key.id]);
        // With no grace, the rotated key and its predecessor both end.
        const toD = await rotated(toC.key.id, 'gh_chain_d00', 0, later(30));
        expect(toD.revoked.toSorted((x, y) => x - y)).toEqual([toB.key.id, toC.key.id]);
      });

      it('a predecessor whose grace period is over is left as it is', async () => {
        const a = await createKey(store, 'gh_chainx_a0');
        const toB = await rotated(a.id, 'gh_chainx_b0', 60_000);
        const toC = await rotated(toB.key.id, 'gh_chainx_c0', 60_000, later(120));
        expect(toC.revoked).toEqual([]);
        expect(await store.findApiKeyById(a.id)).toEqual(toB.old);
      });

      it('the new key is not refused by the cap, and a key in its grace period counts towards none', async () => {
        const key = await createKey(store, 'gh_rot_cap00');
        // At the cap (1 of 1): the rotation still goes through.
        const { key: next } = await rotated(key.id, 'gh_rot_cap01', 3_600_000);
        expect(await store.createApiKey(newKey('gh_rot_cap02'), 1, at)).toEqual({ ok: false, reason: 'license_limit' });
        // Two keys accept requests, one is counted.
        expect(await store.createApiKey(newKey('gh_rot_cap02'), 2, at)).toMatchObject({ ok: true });
        expect(await store.createApiKey(newKey('gh_rot_cap03'), 2, at)).toEqual({ ok: false, reason: 'license_limit' });
        expect(next.rotatedFrom).toBe(key.id);
      });

      it('revoking the new key gives the cap back to the old one, still in its grace period: undoing a rotation frees no place', async () => {
        const key = await createKey(store, 'gh_rot_und00');
        const { key: next } = await rotated(key.id, 'gh_rot_und01', 3_600_000);
        await store.revokeApiKey(next.id, at);
        // The old key accepts requests for an hour more, and counts again: at the cap of 1.
        expect(await store.createApiKey(newKey('gh_rot_und02'), 1, at)).toEqual({ ok: false, reason: 'license_limit' });
        // Once its grace period is over, the place is free.
        expect(await store.createApiKey(newKey('gh_rot_und02'), 1, new Date(at.getTime() + 3_600_001))).toMatchObject({ ok: true });
      });

      it('counts disabled keys apart from active ones; an expired or revoked disabled key is expired or revoked', async () => {
        await createKey(store, 'gh_cnt_on000');
        await createKey(store, 'gh_cnt_off00', { enabled: false });
        await createKey(store, 'gh_cnt_offx0', { enabled: false, expiresAt: later(5) });
        const revoked = await createKey(store, 'gh_cnt_offr0', { enabled: false });
        await store.revokeApiKey(revoked.id, now);
        const grace = await createKey(store, 'gh_cnt_rot00', { enabled: false });
        await rotated(grace.id, 'gh_cnt_rot01', 60_000, now);
        expect(await store.countKeysByStatus(now)).toEqual({ active: 1, disabled: 4, expired: 0, revoked: 1 });
        expect(await store.countKeysByStatus(at)).toEqual({ active: 1, disabled: 3, expired: 1, revoked: 1 });
        expect(await store.countKeysByStatus(later(120))).toEqual({ active: 1, disabled: 2, expired: 2, revoked: 1 });
      });

      it('keeps neither the new key nor the change of the old one when the event cannot be made', async () => {
        const key = await createKey(store, 'gh_rot_fail0');
        const failing = (): never => {
          throw new Error('no event');
        };
        await expect(store.rotateApiKey(key.id, { keyPrefix: 'gh_rot_fail1', keyHash: 'h' }, { now: at, graceMs: 0, audit: failing })).rejects.toThrow('no event');
        expect(await store.listApiKeys()).toEqual([key]);
        expect(await store.listAuditEvents({ limit: 10 })).toEqual([]);
      });
    });

    describe('key lifecycle under concurrency', () => {
      const at = later(10);
      const live = (key: ApiKeyRow, now: Date) => key.revokedAt === null && (key.expiresAt === null || key.expiresAt > now);

      it('20 parallel updates of one key, each a full patch: the stored row is one of them, whole, and each saw the one before', async () => {
        const key = await createKey(store, 'gh_par_upd00');
        const patches = Array.from({ length: 20 }, (_, i): Required<ApiKeyPatch> => ({
          name: `patch ${i}`,
          scopes: i % 2 === 0 ? ['events:write'] : ['mcp:calls', 'mcp:knowledge'],
          agentId: 100 + i,
          expiresAt: later(1000 + i),
          enabled: i % 3 !== 0,
          rateLimit: { requests: 10 + i, perSeconds: 20 + i },
        }));
        const fieldsOf = (row: ApiKeyRow) => ({ name: row.name, scopes: row.scopes, agentId: row.agentId, expiresAt: row.expiresAt, enabled: row.enabled, rateLimit: row.rateLimit });
        const results = await Promise.all(patches.map((patch) => store.updateApiKey(key.id, patch, { now: at, limit: null, audit: updateEvent })));
        const applied = results.map((result) => {
          if (!result.ok) throw new Error(result.reason);
          return { before: fieldsOf(result.before), after: fieldsOf(result.key) };
        });
        applied.forEach(({ after }, i) => expect(after).toEqual(patches[i]));
        const final = fieldsOf((await store.findApiKeyById(key.id))!);
        expect(patches).toContainEqual(final);
        // Serial: the updates form one chain from the created key to the stored one.
        const befores = applied.map(({ before }) => JSON.stringify(before));
        expect(befores.filter((before) => before === JSON.stringify(fieldsOf(key)))).toHaveLength(1);
        for (const { after } of applied) {
          const seen = befores.filter((before) => before === JSON.stringify(after)).length;
          expect(seen).toBe(JSON.stringify(after) === JSON.stringify(final) ? 0 : 1);
        }
        expect(await store.listAuditEvents({ limit: 100 })).toHaveLength(20);
      });

      it('updates racing a revocation: the key ends revoked, every time', async () => {
        for (let round = 0; round < 10; round++) {
          const key = await createKey(store, `gh_par_rev${String(round).padStart(2, '0')}`, { enabled: false });
          const results = await Promise.all([
            store.updateApiKey(key.id, { enabled: true, name: `a${round}` }, { now: at, limit: null }),
            store.revokeApiKey(key.id, at),
            store.updateApiKey(key.id, { expiresAt: later(3600), scopes: ['mcp:calls'] }, { now: at, limit: 100 }),
            store.updateApiKey(key.id, { name: `b${round}` }, { now: at, limit: null }),
          ]);
          for (const result of [results[0], results[2], results[3]]) expect([true, 'revoked']).toContain(result.ok || result.reason);
          expect((await store.findApiKeyById(key.id))?.revokedAt).toEqual(at);
        }
      });

      it('rotations racing a revocation: the old key ends revoked, whichever comes first', async () => {
        for (let round = 0; round < 10; round++) {
          const key = await createKey(store, `gh_par_rrv${String(round).padStart(2, '0')}`);
          const [rotation, revoked] = await Promise.all([
            store.rotateApiKey(key.id, { keyPrefix: `gh_par_rrn${String(round).padStart(2, '0')}`, keyHash: 'h' }, { now: at, graceMs: 60_000 }),
            store.revokeApiKey(key.id, at),
          ]);
          expect(revoked?.revokedAt).toEqual(at);
          expect((await store.findApiKeyById(key.id))?.revokedAt).toEqual(at);
          expect([true, 'revoked']).toContain(rotation.ok || rotation.reason);
        }
      });

      it('20 parallel rotations of one key: exactly one succeeds, the others are told it is rotated', async () => {
        const key = await createKey(store, 'gh_par_rot00');
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) => store.rotateApiKey(key.id, { keyPrefix: `gh_par_rot${String(i + 1).padStart(2, '0')}`, keyHash: 'h' }, { now: at, graceMs: 60_000 })),
        );
        expect(results.filter((result) => result.ok)).toHaveLength(1);
        expect(results.filter((result) => !result.ok).map((result) => !result.ok && result.reason)).toEqual(Array(19).fill('rotated'));
        expect(await store.listApiKeys()).toHaveLength(2);
      });

      it('parallel rotations of a key and of its successors, round after round: never three live keys in the chain', async () => {
        const first = await createKey(store, 'gh_par_chn00');
        let prefixes = 0;
        const nextPrefix = () => `gh_par_c${String(++prefixes).padStart(4, '0')}`;
        for (let round = 0; round < 8; round++) {
          const now = later(10 + round);
          const chain = (await store.listApiKeys()).filter((key) => key.id === first.id || key.rotatedFrom !== null);
          // Every key of the chain, the dead ones too, rotated three times at once.
          const results = await Promise.all(
            chain.flatMap((key) => [0, 1, 2].map(() => store.rotateApiKey(key.id, { keyPrefix: nextPrefix(), keyHash: 'h' }, { now, graceMs: 3_600_000 }))),
          );
          expect(results.filter((result) => result.ok)).toHaveLength(1);
          for (const result of results) if (!result.ok) expect(['rotated', 'revoked']).toContain(result.reason);
          const after = await store.listApiKeys();
          expect(after).toHaveLength(round + 2);
          expect(after.filter((key) => live(key, now))).toHaveLength(2);
          expect(after.filter((key) => key.rotatedTo === null)).toHaveLength(1);
        }
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

    describe('admin sessions', () => {
      /** A session of `adminId`, created and expiring `seconds` after `now`. */
      const session = (id: string, adminId: number, created: number, expires: number, overrides: Partial<AdminSessionRow> = {}): AdminSessionRow => ({
        id,
        adminId,
        createdAt: later(created),
        expiresAt: later(expires),
        clientAddress: '203.0.113.7',
        endedAt: null,
        ...overrides,
      });
      /** An end's audit event as the session service makes it: the admin as subject, the session id in detail. */
      const endEvent =
        (action: string): AuditOf<AdminSessionRow> =>
        (row) => ({ action, actorKind: 'admin', actorId: String(row.adminId), subjectId: String(row.adminId), clientAddress: '203.0.113.9', detail: { session_id: row.id }, at: row.endedAt! });
      const ids = (rows: ReadonlyArray<{ id: string }>) => rows.map((row) => row.id).sort();
      const DAY = 86_400;

      let admin: AdminRow;
      let other: AdminRow;
      beforeEach(async () => {
        ({ admin } = await store.createAdmin('ops@example.com', 'hash-1'));
        ({ admin: other } = await store.createAdmin('other@example.com', 'hash-2'));
      });

      it('stores a login\'s session only while the admin\'s password is still the one the login proved (a change racing it)', async () => {
        expect(await store.createAdminSession(session('proved', admin.id, 0, 3600), 'hash-1')).toBe(true);
        await store.setAdminPassword(admin.id, 'hash-2');
        expect(await store.createAdminSession(session('raced', admin.id, 0, 3600), 'hash-1')).toBe(false);
        expect(await store.findAdminSession('raced')).toBeNull();
        expect(ids(await store.listAdminSessions(admin.id, now))).toEqual(['proved']);
      });

      it('stores a session once: the same id again leaves the stored one as it is', async () => {
        const first = session('sess-a', admin.id, 0, 3600);
        await store.createAdminSession(first);
        expect(await store.findAdminSession('sess-a')).toEqual(first);
        await store.createAdminSession({ ...first, adminId: other.id, clientAddress: '198.51.100.1', expiresAt: later(7200), endedAt: later(5) });
        expect(await store.findAdminSession('sess-a')).toEqual(first);
        expect(await store.listAdminSessions(admin.id, now)).toEqual([first]);
        expect(await store.listAdminSessions(other.id, now)).toEqual([]);
        expect(await store.findAdminSession('sess-unknown')).toBeNull();
        // A session recorded as ended (the logout of a token issued before sessions were stored) is found, never listed.
        const ended = session('sess-b', admin.id, 1, 3600, { clientAddress: null, endedAt: later(1) });
        await store.createAdminSession(ended);
        expect(await store.findAdminSession('sess-b')).toEqual(ended);
        expect(await store.listAdminSessions(admin.id, later(2))).toEqual([first]);
      });

      it('deletes the sessions expired more than a day before a new one is created, and keeps every other', async () => {
        await store.createAdminSession(session('long-gone', admin.id, -3 * DAY, -DAY - 1));
        await store.createAdminSession(session('ended-long-gone', other.id, -3 * DAY, -DAY - 1, { endedAt: later(-2 * DAY) }));
        await store.createAdminSession(session('just-expired', admin.id, -2 * DAY, -DAY + 60));
        await store.createAdminSession(session('ended-live', admin.id, -60, 3600, { endedAt: later(-30) }));
        await store.createAdminSession(session('live', other.id, -60, 3600));
        expect(await store.findAdminSession('long-gone')).not.toBeNull();

        await store.createAdminSession(session('new', admin.id, 0, 3600));
        expect(await store.findAdminSession('long-gone')).toBeNull();
        expect(await store.findAdminSession('ended-long-gone')).toBeNull();
        for (const kept of ['just-expired', 'ended-live', 'live', 'new']) expect(await store.findAdminSession(kept), kept).not.toBeNull();
        expect(ids((await store.exportData()).adminSessions)).toEqual(['ended-live', 'just-expired', 'live', 'new']);
      });

      it("lists the admin's sessions that are neither expired nor ended, oldest first, and no other admin's", async () => {
        const second = session('s-second', admin.id, 20, 3600);
        const first = session('s-first', admin.id, 10, 3600);
        const third = session('s-third', admin.id, 30, 90);
        for (const row of [second, first, third]) await store.createAdminSession(row);
        await store.createAdminSession(session('s-expired', admin.id, -100, -10));
        await store.createAdminSession(session('s-ended', admin.id, 5, 3600, { endedAt: later(6) }));
        const theirs = session('s-theirs', other.id, 0, 3600);
        await store.createAdminSession(theirs);

        expect(await store.listAdminSessions(admin.id, later(40))).toEqual([first, second, third]);
        // Expired at exactly its expires_at.
        expect(await store.listAdminSessions(admin.id, later(90))).toEqual([first, second]);
        expect(await store.listAdminSessions(other.id, later(40))).toEqual([theirs]);
        expect(await store.listAdminSessions(admin.id + other.id + 100, now)).toEqual([]);
      });

      it("ends one session by id, all but one, or all: only the admin's own, each with its event, never twice", async () => {
        for (const id of ['a1', 'a2', 'a3', 'a4']) await store.createAdminSession(session(id, admin.id, 0, 3600));
        await store.createAdminSession(session('a-expired', admin.id, -100, 5));
        await store.createAdminSession(session('b1', other.id, 0, 3600));

        // Another admin's session, an unknown one, an expired one: nothing ends.
        expect(await store.endAdminSessions({ adminId: admin.id, id: 'b1' }, later(10), endEvent('session_ended'))).toEqual([]);
        expect(await store.endAdminSessions({ adminId: admin.id, id: 'nope' }, later(10), endEvent('session_ended'))).toEqual([]);
        expect(await store.endAdminSessions({ adminId: admin.id, id: 'a-expired' }, later(10), endEvent('session_ended'))).toEqual([]);

        const one = await store.endAdminSessions({ adminId: admin.id, id: 'a1' }, later(10), endEvent('logout'));
        expect(one).toEqual([session('a1', admin.id, 0, 3600, { endedAt: later(10) })]);
        expect(await store.findAdminSession('a1')).toEqual(one[0]);
        // Already ended: not ended again, its end time kept, no second event.
        expect(await store.endAdminSessions({ adminId: admin.id, id: 'a1' }, later(11), endEvent('logout'))).toEqual([]);
        expect((await store.findAdminSession('a1'))?.endedAt).toEqual(later(10));

        const allButOne = await store.endAdminSessions({ adminId: admin.id, exceptId: 'a2' }, later(12), endEvent('session_ended'));
        expect(ids(allButOne)).toEqual(['a3', 'a4']);
        expect(allButOne.every((row) => row.endedAt?.getTime() === later(12).getTime())).toBe(true);
        expect(await store.listAdminSessions(admin.id, later(12))).toEqual([session('a2', admin.id, 0, 3600)]);

        const all = await store.endAdminSessions({ adminId: admin.id }, later(13), endEvent('session_ended'));
        expect(ids(all)).toEqual(['a2']);
        expect(await store.endAdminSessions({ adminId: admin.id }, later(14), endEvent('session_ended'))).toEqual([]);
        expect(await store.listAdminSessions(admin.id, later(14))).toEqual([]);
        expect((await store.findAdminSession('a-expired'))?.endedAt).toBeNull();
        expect(await store.listAdminSessions(other.id, later(14))).toEqual([session('b1', other.id, 0, 3600)]);

        // One event per session ended, written with it; an end that ended nothing wrote none.
        const trail = (await store.listAuditEvents({ limit: 100 })).toReversed().map((event) => [event.action, event.subjectId, event.detail.session_id, event.at]);
        expect(trail).toHaveLength(4);
        expect(trail[0]).toEqual(['logout', String(admin.id), 'a1', later(10)]);
        expect(trail.slice(1, 3).toSorted((a, b) => String(a[2]).localeCompare(String(b[2])))).toEqual([
          ['session_ended', String(admin.id), 'a3', later(12)],
          ['session_ended', String(admin.id), 'a4', later(12)],
        ]);
        expect(trail[3]).toEqual(['session_ended', String(admin.id), 'a2', later(13)]);
      });

      it('ends nothing, and writes no event, when an event cannot be made', async () => {
        for (const id of ['a1', 'a2']) await store.createAdminSession(session(id, admin.id, 0, 3600));
        let made = 0;
        const failingSecond: AuditOf<AdminSessionRow> = (row) => {
          if (++made === 2) throw new Error('no event');
          return endEvent('session_ended')(row);
        };
        await expect(store.endAdminSessions({ adminId: admin.id }, later(10), failingSecond)).rejects.toThrow('no event');
        expect(ids(await store.listAdminSessions(admin.id, later(10)))).toEqual(['a1', 'a2']);
        expect(await store.listEndedAdminSessions(later(10))).toEqual([]);
        expect(await store.listAuditEvents({ limit: 10 })).toEqual([]);
        // The store is usable after the rollback.
        expect(ids(await store.endAdminSessions({ adminId: admin.id }, later(11), endEvent('session_ended')))).toEqual(['a1', 'a2']);
        expect(await store.listAuditEvents({ limit: 10 })).toHaveLength(2);
      });

      it('lists the sessions ended whose tokens have not expired yet, of every admin: what a starting replica refuses', async () => {
        await store.createAdminSession(session('live', admin.id, 0, 3600));
        await store.createAdminSession(session('ends-soon', admin.id, 0, 60));
        await store.createAdminSession(session('theirs', other.id, 0, 3600));
        await store.createAdminSession(session('recorded-ended', admin.id, 0, 600, { endedAt: later(1) }));
        await store.endAdminSessions({ adminId: admin.id, exceptId: 'live' }, later(5));
        await store.endAdminSessions({ adminId: other.id }, later(6));
        // Ended without an audit factory: ended all the same.
        expect((await store.findAdminSession('theirs'))?.endedAt).toEqual(later(6));

        const byId = (rows: Array<{ id: string; adminId: number; expiresAt: Date }>) => rows.toSorted((a, b) => a.id.localeCompare(b.id));
        expect(byId(await store.listEndedAdminSessions(later(10)))).toEqual([
          { id: 'ends-soon', adminId: admin.id, expiresAt: later(60) },
          { id: 'recorded-ended', adminId: admin.id, expiresAt: later(600) },
          { id: 'theirs', adminId: other.id, expiresAt: later(3600) },
        ]);
        expect(byId(await store.listEndedAdminSessions(later(60)))).toEqual([
          { id: 'recorded-ended', adminId: admin.id, expiresAt: later(600) },
          { id: 'theirs', adminId: other.id, expiresAt: later(3600) },
        ]);
        expect(await store.listEndedAdminSessions(later(3600))).toEqual([]);
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
        expect(data.apiKeys).toHaveLength(6);
        // The lifecycle's columns are among what is copied.
        expect(data.apiKeys.find((key) => key.keyPrefix === 'gh_export_d0')).toMatchObject({ enabled: false, rateLimit: { requests: 5, perSeconds: 60 }, updatedAt: later(3) });
        const [old, successor] = [data.apiKeys.find((key) => key.keyPrefix === 'gh_export_e0')!, data.apiKeys.find((key) => key.keyPrefix === 'gh_export_f0')!];
        expect(old).toMatchObject({ rotatedTo: successor.id, expiresAt: later(4 + 3600), updatedAt: later(4) });
        expect(successor).toMatchObject({ rotatedFrom: old.id, rotatedTo: null, scopes: ['mcp:calls'], createdAt: later(4), updatedAt: later(4) });
        expect(data.settings).toEqual([{ name: 'jwt_secret', value: 'secret-1' }, { name: 'other', value: 'value-2' }]);
        // Admin sessions, ended ones included: a token ended on one store stays ended on the other.
        const [ops, second] = data.admins;
        expect(data.adminSessions).toEqual([
          { id: 'sess-live', adminId: ops!.id, createdAt: later(1), expiresAt: later(3600), clientAddress: '203.0.113.7', endedAt: null },
          { id: 'sess-ended', adminId: ops!.id, createdAt: later(2), expiresAt: later(3600), clientAddress: '203.0.113.8', endedAt: later(6) },
          { id: 'sess-second', adminId: second!.id, createdAt: later(2), expiresAt: later(600), clientAddress: null, endedAt: null },
        ]);

        const copy = await emptyStore();
        try {
          await copy.importData(data);
          expect(await copy.exportData()).toEqual(data);
          expect(await copy.listEndedAdminSessions(now)).toEqual([{ id: 'sess-ended', adminId: ops!.id, expiresAt: later(3600) }]);
          expect((await copy.listAdminSessions(ops!.id, now)).map((row) => row.id)).toEqual(['sess-live']);
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
          expect((await copy.listApiKeys()).map((key) => key.id)).toEqual([10, 15, 20, 25, 30, 35]);
          expect((await createKey(copy, 'gh_next00000')).id).toBeGreaterThan(35);
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
          const empty = { admins: [], apiKeys: [], auditEvents: [], settings: [], adminSessions: [] };
          const clash = { ...data.apiKeys[1]!, id: 999 };
          await expect(copy.importData({ ...data, apiKeys: [...data.apiKeys, clash] })).rejects.toThrow();
          expect(await copy.exportData()).toEqual(empty);
          // The sessions are the last table written: a clash there undoes every table before it.
          await expect(copy.importData({ ...data, adminSessions: [...data.adminSessions, data.adminSessions[0]!] })).rejects.toThrow();
          expect(await copy.exportData()).toEqual(empty);
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
      const session = { id: 'sess-kept', adminId: admin.id, createdAt: now, expiresAt: later(3600), clientAddress: null, endedAt: null };
      await store.createAdminSession(session);
      await store.close();

      const again = await place.remigrate();
      expect(again.applied).toEqual([]);
      expect(again.recorded).toEqual(again.expected);

      store = await place.open();
      expect(await store.listAdmins()).toEqual([admin]);
      expect(await store.listApiKeys()).toEqual([key]);
      expect(await store.listAuditEvents({ limit: 10 })).toEqual([event]);
      expect(await store.getOrCreateSetting('jwt_secret', 'second')).toBe(secret);
      expect(await store.findAdminSession('sess-kept')).toEqual(session);
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
