import { describe, expect, it } from 'vitest';
import { Argon2Hasher } from '../../../src/crypto/argon2.ts';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { KeyService, type Actor } from '../../../src/keys/key-service.ts';
import type { ApiKeyRow, AuditOf, CreateKeyResult, NewApiKey, NewAuditEvent, RateLimit, Store } from '../../../src/store/store.ts';

const NOW = new Date('2026-06-01T00:00:00Z');
const ADMIN: Actor = { kind: 'admin', id: '3', address: '203.0.113.7' };

/** The key calls of a store, keeping the event each change was given, as the store would write it. */
class KeyLog implements Pick<Store, 'createApiKey' | 'revokeApiKey'> {
  readonly keys = new Map<number, ApiKeyRow>();
  readonly events: NewAuditEvent[] = [];
  readonly calls: string[] = [];
  /** Prefix clashes to answer before a create succeeds. */
  clashes = 0;

  createApiKey(input: NewApiKey, _limit: number | null, now: Date, audit?: AuditOf<ApiKeyRow>): Promise<CreateKeyResult> {
    this.calls.push('createApiKey');
    if (this.clashes-- > 0) return Promise.resolve({ ok: false, reason: 'prefix_taken' });
    const row: ApiKeyRow = { ...input, id: this.keys.size + 1, createdAt: now, updatedAt: now, lastUsedAt: null, revokedAt: null, enabled: input.enabled ?? true, rateLimit: input.rateLimit ?? null, rotatedFrom: null, rotatedTo: null };
    this.keys.set(row.id, row);
    if (audit) this.events.push(audit(row));
    return Promise.resolve({ ok: true, key: row });
  }

  revokeApiKey(id: number, now: Date, audit?: AuditOf<ApiKeyRow>): Promise<ApiKeyRow | null> {
    this.calls.push('revokeApiKey');
    const found = this.keys.get(id);
    if (!found) return Promise.resolve(null);
    const row = { ...found, revokedAt: found.revokedAt ?? now };
    this.keys.set(id, row);
    if (audit) this.events.push(audit(row));
    return Promise.resolve(row);
  }
}

function serviceOn(store: KeyLog, defaultRateLimit: RateLimit | null = null): KeyService {
  return new KeyService({
    store: store as unknown as Store,
    hasher: new Argon2Hasher({ memoryKiB: 1024, timeCost: 1, parallelism: 1, concurrency: 1 }),
    licenceLimit: null,
    defaultRateLimit,
    listener: { keyChanged: async (id) => void store.calls.push(`keyChanged ${id}`) },
    now: () => NOW,
  });
}

const REQUEST = { name: 'audited', agentId: null, scopes: ['events:write'], expiresAt: null };

describe('KeyService: every change goes to the store with its audit event', () => {
  it('creates a key with its key_created event, made from the stored row', async () => {
    const store = new KeyLog();
    const { row } = await serviceOn(store).createKey(REQUEST, ADMIN);
    expect(store.events).toEqual([
      { action: 'key_created', actorKind: 'admin', actorId: '3', subjectId: String(row.id), clientAddress: '203.0.113.7', detail: {}, at: NOW },
    ]);
  });

  it.each([
    ['none named: the default', undefined, { requests: 600, perSeconds: 60 }],
    ['one named: that one', { requests: 5, perSeconds: 1 }, { requests: 5, perSeconds: 1 }],
    ['none, explicitly (null): none', null, null],
  ] as const)('a new key\'s rate limit with DEFAULT_KEY_RATE_LIMIT set, %s', async (_what, rateLimit, stored) => {
    const store = new KeyLog();
    const { row } = await serviceOn(store, { requests: 600, perSeconds: 60 }).createKey({ ...REQUEST, ...(rateLimit === undefined ? {} : { rateLimit }) }, ADMIN);
    expect(row.rateLimit).toEqual(stored);
  });

  it('a new key without DEFAULT_KEY_RATE_LIMIT has no rate limit', async () => {
    const store = new KeyLog();
    expect((await serviceOn(store).createKey(REQUEST, ADMIN)).row.rateLimit).toBeNull();
  });

  it('draws a new prefix after a clash, and the one key stored has one event', async () => {
    const store = new KeyLog();
    store.clashes = 2;
    await serviceOn(store).createKey(REQUEST, { kind: 'cli', id: 'ops', address: null });
    expect(store.keys.size).toBe(1);
    expect(store.events).toMatchObject([{ action: 'key_created', actorKind: 'cli', actorId: 'ops', clientAddress: null }]);
  });

  it('revokes with a key_revoked event on every call that finds the key, before the replicas are told', async () => {
    const store = new KeyLog();
    const service = serviceOn(store);
    const { row } = await service.createKey(REQUEST, ADMIN);
    await service.revokeKey(row.id, ADMIN);
    await service.revokeKey(row.id, ADMIN);
    expect(store.events.map((event) => [event.action, event.subjectId])).toEqual([
      ['key_created', String(row.id)],
      ['key_revoked', String(row.id)],
      ['key_revoked', String(row.id)],
    ]);
    expect(store.calls).toEqual(['createApiKey', 'revokeApiKey', `keyChanged ${row.id}`, 'revokeApiKey', `keyChanged ${row.id}`]);
  });

  it('an unknown id is not_found, with no event and nothing told', async () => {
    const store = new KeyLog();
    const refused: unknown = await serviceOn(store).revokeKey(41, ADMIN).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(GatewayError);
    expect((refused as GatewayError).code).toBe('not_found');
    expect(store.events).toEqual([]);
    expect(store.calls).toEqual(['revokeApiKey']);
  });
});
