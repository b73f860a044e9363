import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { generateKey } from '../../../src/credentials/key-format.ts';
import { refusalFields } from '../../../src/http/refusal-log.ts';

/** The parts of a request the fields are read from. */
const requestOf = (method: string, url: string, authorization?: string) =>
  ({ method, url, headers: authorization === undefined ? {} : { authorization } }) as unknown as IncomingMessage;

describe('refusalFields', () => {
  const key = generateKey();

  it.each([
    { description: 'no credential', request: requestOf('GET', '/dashboard'), expected: { method: 'GET', path: '/dashboard', credential: 'none' } },
    { description: 'the query string dropped', request: requestOf('GET', '/a?api_key=secret&x=1'), expected: { method: 'GET', path: '/a', credential: 'none' } },
    { description: 'a fragment dropped', request: requestOf('GET', '/a#token=secret'), expected: { method: 'GET', path: '/a', credential: 'none' } },
    { description: 'a well-formed key: its prefix', request: requestOf('POST', '/e', `Bearer ${key}`), expected: { method: 'POST', path: '/e', credential: 'api_key', keyPrefix: key.slice(0, 12) } },
    { description: 'a key of the wrong length: no prefix', request: requestOf('POST', '/e', 'Bearer ghk_short-secret'), expected: { method: 'POST', path: '/e', credential: 'api_key' } },
    { description: 'a JWT: admin, by its shape', request: requestOf('GET', '/x', 'Bearer a.b.c'), expected: { method: 'GET', path: '/x', credential: 'admin' } },
    { description: 'another token', request: requestOf('GET', '/x', 'Bearer opaque'), expected: { method: 'GET', path: '/x', credential: 'unknown' } },
    { description: 'another scheme', request: requestOf('GET', '/x', 'Basic dXNlcjpwYXNz'), expected: { method: 'GET', path: '/x', credential: 'unknown' } },
  ])('$description', ({ request, expected }) => {
    expect(refusalFields(request)).toEqual(expected);
  });

  it('adds the route, the endpoint and the key id it is told', () => {
    expect(refusalFields(requestOf('GET', '/mcp', `Bearer ${key}`), { routeName: 'mcp', keyId: 4 })).toEqual({
      method: 'GET',
      path: '/mcp',
      route: 'mcp',
      credential: 'api_key',
      keyId: 4,
      keyPrefix: key.slice(0, 12),
    });
    expect(refusalFields(requestOf('GET', '/api/v1/api-keys/9'), { endpoint: '/api/v1/api-keys/:id' })).toMatchObject({ endpoint: '/api/v1/api-keys/:id' });
  });

  it('never holds more of a key than its prefix, and cuts a very long path', () => {
    const fields = refusalFields(requestOf('GET', `/${'p'.repeat(2000)}?k=${key}`, `Bearer ${key}`));
    expect(JSON.stringify(fields)).not.toContain(key.slice(12));
    expect(fields.path.length).toBeLessThanOrEqual(513);
  });
});
