import { describe, expect, it } from 'vitest';
import { parseRequestTarget } from '../../../src/proxy/request-target.ts';

describe('request target', () => {
  it.each([
    ['a plain path', '/api/v1/agents/2/events', '/api/v1/agents/2/events', ''],
    ['a query string', '/api/v1/agents/2/events?x=1&y=%2F', '/api/v1/agents/2/events', '?x=1&y=%2F'],
    ['the root', '/', '/', ''],
    ['a reserved character encoded', '/files/a%20b', '/files/a%20b', ''],
    ['a percent sign encoded', '/files/100%25', '/files/100%25', ''],
    ['a dot inside a name', '/static/app.js', '/static/app.js', ''],
    ['three dots', '/x/.../y', '/x/.../y', ''],
    ['a trailing slash', '/dashboard/', '/dashboard/', ''],
  ])('keeps %s as it is', (_what, url, path, search) => {
    expect(parseRequestTarget(url)).toEqual({ path, search });
  });

  it.each([
    ['a dot-dot segment', '/api/v1/agents/2/../3/events'],
    ['a trailing dot-dot', '/api/v1/agents/2/events/..'],
    ['a dot segment', '/api/v1/./agents/2/events'],
    ['a trailing dot', '/api/v1/agents/2/events/.'],
    ['an encoded dot (lower)', '/api/v1/agents/2/%2e%2e/3/events'],
    ['an encoded dot (upper)', '/api/v1/agents/2/%2E%2E/3/events'],
    ['a half-encoded dot-dot', '/api/v1/agents/2/.%2e/3/events'],
    ['an encoded slash', '/api/v1/agents/2%2f..%2f3/events'],
    ['an encoded slash (upper)', '/api/v1/agents%2F3/events'],
    ['an encoded backslash', '/api/v1/agents/2%5c..%5c3/events'],
    ['a raw backslash', '/api/v1/agents/2\\..\\3/events'],
    ['an encoded NUL', '/api/v1/agents/2%00/events'],
    ['a raw NUL', '/api/v1/agents/2\u0000/events'],
    ['a matrix parameter', '/api/v1/agents/2;x=1/events'],
    ['a semicolon at the end', '/api/v1/agents/2/events;'],
    ['a double slash', '/api/v1//agents/2/events'],
    ['a leading double slash', '//evil.example/api'],
    ['an absolute-form target', 'http://127.0.0.1/api/v1/agents/2/events'],
    ['an asterisk-form target', '*'],
    ['a fragment', '/api/v1/agents/2/events#x'],
    ['a fragment in the query', '/api/v1/agents/2/events?a=1#x'],
    ['an encoded digit', '/api/v1/agents/%32/events'],
    ['an encoded letter', '/api/v1/agents/2/%65vents'],
    ['an encoded hyphen', '/api/v1/api%2Dkeys'],
    ['an encoded tilde', '/x/%7E'],
    ['a broken escape', '/api/v1/agents/2/events%'],
    ['a broken escape with one digit', '/api/v1/agents/2/events%2'],
    ['a non-hex escape', '/api/v1/agents/%zz/events'],
    ['a space', '/api/v1/agents/2 /events'],
    ['a tab', '/api/v1/agents/2\t/events'],
    ['non-ASCII', '/api/v1/agents/２/events'],
  ])('refuses %s with 400 ambiguous_path', (_what, url) => {
    expect(() => parseRequestTarget(url)).toThrow(expect.objectContaining({ code: 'ambiguous_path', status: 400 }));
  });
});
