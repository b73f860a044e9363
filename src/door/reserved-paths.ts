/**
 * The paths that belong to the gateway (docs/security.md, "Reserved paths"): whatever fastify
 * serves on them, they are never forwarded. A request for one is handed to fastify, which
 * answers the endpoint it names exactly, or `404`/`405` problem+json; nothing sent to them, a
 * password change's body least of all, can reach the upstream behind an admin catch-all route.
 *
 * `under`: the path itself and everything below it, segment by segment (`/docs`, `/docs/x`,
 * not `/docsx`); `prefix`: any path that starts with it (`/api/v1/audit`, `/api/v1/audit-events`).
 * Reserved whatever the configuration: `/docs` with `DOCS_ENABLED=false`, `/console` before
 * the console exists, an `MCP_PATH` or a route set beneath one of them.
 */
export const RESERVED_PATHS: readonly { readonly path: string; readonly match: 'under' | 'prefix' }[] = [
  { path: '/api/v1/auth', match: 'under' },
  { path: '/api/v1/api-keys', match: 'under' },
  { path: '/api/v1/audit', match: 'prefix' },
  { path: '/api/v1/openapi.json', match: 'under' },
  { path: '/docs', match: 'under' },
  { path: '/console', match: 'under' },
];

/** `%XX`, decoded byte by byte to the Latin-1 character of that byte: every ASCII name reads as itself, nothing throws. */
const ESCAPE = /%([0-9A-Fa-f]{2})/g;

/** What `comparable` would change beyond case: an escape, a backslash, an empty or dot segment. */
const SPELT_ANOTHER_WAY = /[%\\]|\/\/|\/\./;

/** Whether `url` (a request target, query string and all) falls under a reserved path, however it is spelt. */
export function isReservedPath(url: string): boolean {
  const raw = url.slice(0, indexOrEnd(url, '?', 0));
  // Most paths need no more than their case folded (a trailing slash is read as a segment boundary below).
  const path = SPELT_ANOTHER_WAY.test(raw) ? comparable(raw) : raw.toLowerCase();
  for (const { path: reserved, match } of RESERVED_PATHS) {
    if (path.startsWith(reserved) && (match === 'prefix' || path.length === reserved.length || path.charCodeAt(reserved.length) === 47 /* / */)) return true;
  }
  return false;
}

/**
 * The path as the most lenient server behind the gateway could read it: the query string cut;
 * percent-escapes decoded until none is left (`%252f` is a `/` to a server that decodes twice);
 * `\` read as `/`; lower case; empty and `.` segments dropped, `..` taking the one before it
 * away (never above the root); no trailing slash. Only ever compared, never forwarded.
 */
export function comparable(url: string): string {
  let path = url.slice(0, indexOrEnd(url, '?', 0));
  // Each round shortens the path, so this ends.
  for (let decoded = path.replace(ESCAPE, decodeByte); decoded !== path; decoded = path.replace(ESCAPE, decodeByte)) path = decoded;
  const segments: string[] = [];
  for (const segment of path.replaceAll('\\', '/').toLowerCase().split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

function decodeByte(_escape: string, hex: string): string {
  return String.fromCharCode(Number.parseInt(hex, 16));
}

function indexOrEnd(text: string, char: string, from: number): number {
  const at = text.indexOf(char, from);
  return at === -1 ? text.length : at;
}
