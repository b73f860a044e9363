import { describe, expect, it } from 'vitest';
import { storableData } from '../../../src/store/storable-data.ts';
import { encodableString, storableString, unencodableIn, unstorableIn } from '../../../src/store/storable-text.ts';
import type { StoreData } from '../../../src/store/store.ts';

const NUL = 'must not contain a NUL character (U+0000)';
const LONE = 'must be valid Unicode (it holds a lone surrogate, U+D800–U+DFFF)';

describe('unstorableIn / unencodableIn: the one rule', () => {
  it.each([
    ['plain ASCII', 'billing sync', null, null],
    ['the empty string', '', null, null],
    ['a surrogate pair (an emoji)', 'deploy 🚀', null, null],
    ['other control characters', 'tab\there\u0001\u007f', null, null],
    ['U+FFFD and noncharacters', '\ufffd\uffff\ufffe', null, null],
    ['a NUL', 'a\u0000b', NUL, null],
    ['a NUL alone', '\u0000', NUL, null],
    ['a lone high surrogate', 'x\ud800', LONE, LONE],
    ['a lone low surrogate', '\udc00x', LONE, LONE],
    ['a pair the wrong way round', '\ude80\ud83d', LONE, LONE],
    ['a NUL and a lone surrogate: the NUL is named', '\u0000\ud800', NUL, LONE],
  ])('%s', (_what, text, stored, hashed) => {
    expect(unstorableIn(text)).toBe(stored);
    expect(unencodableIn(text)).toBe(hashed);
  });
});

describe('storableString / encodableString', () => {
  it('stops the schema\'s own rules: one issue, this one', () => {
    const schema = storableString().trim().min(1).max(3);
    expect(schema.safeParse('\u0000 far too long').error?.issues.map((issue) => issue.message)).toEqual([NUL]);
    expect(schema.parse(' ab ')).toBe('ab');
  });

  it('lets a NUL through where the string is only hashed', () => {
    expect(encodableString().parse('pass\u0000word')).toBe('pass\u0000word');
    expect(encodableString().safeParse('pass\ud800').error?.issues.map((issue) => issue.message)).toEqual([LONE]);
  });
});

describe('storableData: what store copy writes', () => {
  const at = new Date('2026-01-01T00:00:00Z');
  const data = (name: string, detail: Record<string, unknown> = {}): StoreData => ({
    admins: [{ id: 1, email: 'a@example.test', passwordHash: '$argon2id$…', createdAt: at }],
    apiKeys: [
      {
        id: 7, name, agentId: null, keyPrefix: 'ghk_abcdefgh', keyHash: '$argon2id$…', scopes: ['events:write'], createdAt: at, lastUsedAt: null,
        expiresAt: null, revokedAt: null, enabled: true, updatedAt: at, rateLimit: { requests: 5, perSeconds: 1 }, rotatedFrom: null, rotatedTo: null,
      },
    ],
    auditEvents: [{ id: 3, at, action: 'key_updated', actorKind: 'admin', actorId: '1', subjectId: '7', clientAddress: null, detail }],
    settings: [{ name: 'jwt_secret', value: 'secret' }],
    adminSessions: [],
  });

  it('leaves clean data as it is: the same objects', () => {
    const clean = data('billing sync', { fields: ['name'] });
    const { data: copied, replaced } = storableData(clean);
    expect(replaced).toEqual([]);
    expect(copied.apiKeys[0]).toBe(clean.apiKeys[0]);
    expect(copied.auditEvents[0]).toBe(clean.auditEvents[0]);
  });

  it('replaces each NUL and lone surrogate by U+FFFD, in fields and in JSON details (member names too), and says where', () => {
    const { data: copied, replaced } = storableData(data('billing\u0000sync\ud800', { 'fi\u0000eld': ['x\u0000'] }));
    expect(copied.apiKeys[0]!.name).toBe('billing\ufffdsync\ufffd');
    expect(copied.apiKeys[0]!.createdAt).toBe(at);
    expect(copied.apiKeys[0]!.rateLimit).toEqual({ requests: 5, perSeconds: 1 });
    expect(copied.auditEvents[0]!.detail).toEqual({ 'fi\ufffdeld': ['x\ufffd'] });
    expect(replaced).toEqual([
      { table: 'api_keys', id: 7, field: 'name' },
      { table: 'audit_events', id: 3, field: 'detail' },
    ]);
  });
});
