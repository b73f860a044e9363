import { describe, expect, it } from 'vitest';
import { comparable, isReservedPath, RESERVED_PATHS } from '../../../src/config/reserved-paths.ts';

describe('reserved paths', () => {
  it.each([
    ['the login', '/api/v1/auth/login'],
    ['below /api/v1/auth', '/api/v1/auth/anything/at/all'],
    ['/api/v1/auth itself', '/api/v1/auth'],
    ['a trailing slash', '/api/v1/api-keys/29/'],
    ['upper case', '/API/V1/API-KEYS/29'],
    ['a query string', '/api/v1/auth/logout/?next=/dashboard'],
    ['an encoded slash', '/api/v1%2Fapi-keys/29'],
    ['a lower-case encoded slash', '/api/v1%2fauth%2fpassword'],
    ['a double-encoded slash', '/api/v1%252Fapi-keys/29'],
    ['a triple-encoded slash', '/api/v1%25252Fapi-keys/29'],
    ['an encoded letter', '/api/v1/%41pi-keys'],
    ['a backslash', '/api/v1\\auth\\logout'],
    ['an encoded backslash', '/api/v1%5Cauth/logout'],
    ['a dot segment', '/api/v1/./auth/logout'],
    ['a dot-dot segment', '/api/v1/x/../auth/logout'],
    ['encoded dots', '/api/v1/x/%2e%2e/auth/logout'],
    ['encoded dots and slashes', '/api/v1/x%2F%2E%2E%2Fauth/logout'],
    ['dot-dot above the root', '/../../../api/v1/auth/logout'],
    ['a leading double slash', '//api/v1/auth/logout'],
    ['a double slash inside', '/api/v1//auth/logout'],
    ['the audit trail', '/api/v1/audit-events'],
    ['any path starting /api/v1/audit', '/api/v1/auditors'],
    ['the OpenAPI document, in another case', '/api/v1/OPENAPI.JSON'],
    ['the docs', '/docs'],
    ['below the docs', '/docs/js/scalar.js'],
    ['the console', '/console'],
    ['below the console', '/Console/keys/'],
    ['a malformed escape below a reserved path', '/api/v1/auth/%zz'],
    ['a dotless ı, which upper-cases to I', '/ap%C4%B1/v1/api-keys/1'],
    ['a long ſ, which upper-cases to S', '/api/v1/api-key%C5%BF/1'],
    ['a fullwidth ａ', '/api/v1/%EF%BD%81uth/password'],
    ['a Kelvin sign for k', '/api/v1/api-%E2%84%AAeys/1'],
    ['an accent that folds into the name', '/api/v1/%C3%A0uth/password'],
    ['a combining mark', '/api/v1/a%CC%81uth/password'],
    ['a zero-width space', '/api/v1/a%E2%80%8Buth/password'],
    ['a fullwidth percent sign spelling an escape', '/api/v1/%EF%BC%85%34%31uth'],
    ['an encoded ; parameter', '/api%3B/v1/api-keys/1'],
    ['a ; parameter', '/api;x=1/v1/api-keys/1'],
    ['a dot-dot with a ; parameter', '/x/..;/api/v1/auth/password'],
    ['a trailing tab', '/api/v1/auth%09/password'],
    ['a trailing space', '/api/v1/api-keys%20/1'],
    ['a trailing NUL', '/api/v1/auth%00/password'],
    ['a trailing line feed', '/api/v1/auth%0A/password'],
    ['an overlong /, which is no UTF-8', '/x%C0%AF..%C0%AFapi/v1/auth'],
    ['an overlong NUL', '/dashboard%C0%80'],
    ['an invalid UTF-8 byte', '/dashboard/%FF'],
    ['an encoded surrogate', '/dashboard/%ED%A0%80'],
    ['more rounds of encoding than are decoded', `/%${'25'.repeat(20)}41`],
  ])('%s: %s is reserved', (_what, url) => {
    expect(isReservedPath(url)).toBe(true);
  });

  it.each([
    ['an events path', '/api/v1/agents/2/events'],
    ['the MCP path', '/mcp'],
    ['an admin dashboard path', '/dashboard/x'],
    ['the root', '/'],
    ['a name that starts like /api/v1/api-keys', '/api/v1/api-keysx'],
    ['a name that starts like /docs', '/docsx'],
    ['a name that starts like /console', '/consoles'],
    ['a name that starts like /api/v1/auth', '/api/v1/authors'],
    ['another version', '/api/v2/auth/login'],
    ['a reserved name below another path', '/x/api/v1/auth/login'],
    ['a reserved name in the query string only', '/dashboard?next=/api/v1/auth/logout'],
    ['an encoded query mark', '/dashboard%3F/api/v1/auth'],
    ['absolute form (refused by the door as ambiguous)', 'http://gw/api/v1/auth/logout'],
    ['a non-ASCII path under no reserved name', '/caf%C3%A9/%E2%84%AA'],
    ['an accent that does not fold into the name', '/api/v1/%C4%B0uth'],
    ['a space inside a name', '/api/v1/au%20th'],
  ])('%s: %s is not reserved', (_what, url) => {
    expect(isReservedPath(url)).toBe(false);
  });

  it.each([
    ['/API/v1//x/%2E%2e/./Auth%252flogout/?a', '/api/v1/auth/logout'],
    ['/', '/'],
    ['//', '/'],
    ['/..', '/'],
    ['/a/b/../../..', '/'],
    ['/a%zz', '/a%zz'],
    ['/Caf%C3%A9;v=1/%EF%BC%A1%CC%81%09/', '/cafe/a'],
    ['/a/%C5%BF%C4%B1%E2%84%AA', '/a/sik'],
  ])('%s reads as %s', (url, read) => {
    expect(comparable(url)).toBe(read);
  });

  it.each(['/x%C0%AF', '/x%C0%80', '/x%FF', '/x%E2%84', '/x%ED%A0%80'])('%s is no UTF-8: read no way at all', (url) => {
    expect(comparable(url)).toBeUndefined();
  });

  it('lists each reserved path in the form it is compared in', () => {
    for (const { path } of RESERVED_PATHS) expect(comparable(path)).toBe(path);
  });
});
