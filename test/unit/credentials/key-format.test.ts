import { describe, expect, it } from 'vitest';
import {
  generateKey,
  isWellFormedKey,
  KEY_LENGTH,
  KEY_TAG,
  keyPrefixOf,
} from '../../../src/credentials/key-format.ts';
import { extractBearer } from '../../../src/credentials/bearer.ts';

describe('key format', () => {
  it('generates keys with the tag, the length and a valid checksum', () => {
    for (let i = 0; i < 200; i++) {
      const key = generateKey();
      expect(key.startsWith(KEY_TAG)).toBe(true);
      expect(key).toHaveLength(KEY_LENGTH);
      expect(key).toMatch(/^ghk_[0-9A-Za-z]+$/);
      expect(isWellFormedKey(key)).toBe(true);
    }
  });

  it('draws at least 192 bits: 40 base62 characters', () => {
    expect(40 * Math.log2(62)).toBeGreaterThanOrEqual(192);
  });

  it('never repeats a key or (in practice) a prefix', () => {
    const keys = new Set(Array.from({ length: 5000 }, generateKey));
    expect(keys.size).toBe(5000);
    expect(new Set([...keys].map(keyPrefixOf)).size).toBe(5000);
  });

  it('uses every base62 character roughly evenly', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 2000; i++) for (const ch of generateKey().slice(4, 44)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    expect(counts.size).toBe(62);
    const expected = (2000 * 40) / 62;
    for (const count of counts.values()) expect(Math.abs(count - expected) / expected).toBeLessThan(0.15);
  });

  it('the prefix is the first 12 characters', () => {
    const key = generateKey();
    expect(keyPrefixOf(key)).toBe(key.slice(0, 12));
    expect(keyPrefixOf(key)).toHaveLength(12);
  });

  const key = generateKey();
  const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === 'a' ? 'b' : 'a') + text.slice(at + 1);
  it.each([
    ['a truncated key', key.slice(0, -1)],
    ['a key with an extra character', key + 'a'],
    ['a mistyped body character', flip(key, 10)],
    ['a mistyped checksum character', flip(key, KEY_LENGTH - 2)],
    ['two swapped characters', key.slice(0, 5) + key[6] + key[5] + key.slice(7)],
    ['another tag', 'ghx_' + key.slice(4)],
    ['a character outside base62', key.slice(0, 20) + '-' + key.slice(21)],
    ['the empty string', ''],
    ['non-ASCII', key.slice(0, 20) + 'é' + key.slice(21)],
  ])('refuses %s without any I/O', (_what, candidate) => {
    if (candidate === key.slice(0, 5) + key[6] + key[5] + key.slice(7) && key[5] === key[6]) return;
    expect(isWellFormedKey(candidate)).toBe(false);
  });
});

describe('bearer extraction', () => {
  const key = generateKey();
  it.each([
    ['no header', undefined, 'none'],
    ['an API key', `Bearer ${key}`, 'api_key'],
    ['the scheme in any case', `bEARER ${key}`, 'api_key'],
    ['a JWT', 'Bearer aaa.bbb.ccc', 'jwt'],
    ['an unknown token', 'Bearer abc', 'unknown'],
    ['a JWT with an empty part', 'Bearer aaa..ccc', 'unknown'],
  ])('classifies %s', (_what, header, kind) => {
    expect(extractBearer(header).kind).toBe(kind);
  });

  it.each([
    ['Basic', 'Basic YTpi'],
    ['a bare scheme', 'Bearer'],
    ['two tokens', 'Bearer a b'],
    ['a comma list', `Bearer ${key}, Bearer ${key}`],
    ['a control character', 'Bearer a\u0000b'],
  ])('refuses %s as invalid_credential', (_what, header) => {
    expect(extractBearer(header)).toMatchObject({ kind: 'malformed', code: 'invalid_credential' });
  });

  it('refuses two Authorization headers', () => {
    expect(extractBearer(['Bearer a', 'Bearer b'])).toMatchObject({ kind: 'malformed', code: 'duplicate_header' });
  });
});
