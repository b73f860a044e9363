/**
 * The paths that belong to the gateway (docs/security.md, "Reserved paths"): whatever fastify
 * serves on them, they are never forwarded. A request for one is handed to fastify, which
 * answers the endpoint it names exactly, or `404`/`405` problem+json; nothing sent to them, a
 * password change's body least of all, can reach the upstream behind an admin catch-all route.
 *
 * `under`: the path itself and everything below it, segment by segment (`/docs`, `/docs/x`,
 * not `/docsx`); `prefix`: any path that starts with it (`/api/v1/audit`, `/api/v1/audit-events`).
 * Reserved whatever the configuration: `/docs` with `DOCS_ENABLED=false`, `/console` before
 * the console exists. Here, beside the configuration, because the configuration is checked
 * against it: an `MCP_PATH` or a route beneath one of them is refused at start (the door,
 * which enforces it, depends on the configuration already; the reverse would be an import cycle).
 */
export const RESERVED_PATHS: readonly { readonly path: string; readonly match: 'under' | 'prefix' }[] = [
  { path: '/api/v1/auth', match: 'under' },
  { path: '/api/v1/api-keys', match: 'under' },
  { path: '/api/v1/audit', match: 'prefix' },
  { path: '/api/v1/openapi.json', match: 'under' },
  { path: '/docs', match: 'under' },
  { path: '/console', match: 'under' },
];

/** A run of `%XX` escapes: decoded together, as the UTF-8 bytes of one or more characters. */
const ESCAPES = /(?:%[0-9A-Fa-f]{2})+/g;

/**
 * What `comparable` would change beyond ASCII case: an escape, a backslash, a `;` parameter,
 * an empty or dot segment, a control character, a space or anything outside ASCII.
 */
// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const SPELT_ANOTHER_WAY = /[%\\;\x00-\x20\x7f-\uffff]|\/\/|\/\./;

/** Combining marks (`a` + U+0300 is `à`), once a character is decomposed: dropped, so `àuth` reads `auth`. */
const MARKS = /\p{M}/gu;

/** Format characters (zero-width space, joiners, bidi controls): invisible, so dropped wherever they are. */
const INVISIBLE = /\p{Cf}/gu;

/** What a lenient reader cuts from a segment: a `;` parameter (`api;x`, `..;`), then trailing whitespace and controls (`auth%00`, `auth%09`). */
const PARAMETER = /;.*$/s;
const TRAILING_BLANKS = /[\s\p{Cc}]+$/u;

/** Rounds of decoding beyond which a path is taken for the gateway's rather than decoded further. */
const MAX_DECODINGS = 16;

/** Whether `url` (a request target, query string and all) falls under a reserved path, however it is spelt. */
export function isReservedPath(url: string): boolean {
  const raw = url.slice(0, indexOrEnd(url, '?', 0));
  // Most paths need no more than their case folded (a trailing slash is read as a segment boundary below).
  // A path whose escapes are no UTF-8 (`%C0%AF`, an overlong `/`) cannot be read the one way: the gateway's, never forwarded.
  const path = SPELT_ANOTHER_WAY.test(raw) ? comparable(raw) : raw.toLowerCase();
  if (path === undefined) return true;
  for (const { path: reserved, match } of RESERVED_PATHS) {
    if (path.startsWith(reserved) && (match === 'prefix' || path.length === reserved.length || path.charCodeAt(reserved.length) === 47 /* / */)) return true;
  }
  return false;
}

/**
 * The path as the most lenient server behind the gateway could read it: the query string cut;
 * percent-escapes decoded as UTF-8 until none is left (`%252f` is a `/` to a server that
 * decodes twice); compatibility forms and combining marks dropped (`ａ`, `K`, `à` read `a`,
 * `k`, `a`) and case folded fully (`ı`, `ſ` read `i`, `s`); `\` read as `/`; from each segment
 * a `;` parameter and trailing whitespace or control characters cut; empty and `.` segments
 * dropped, `..` taking the one before it away (never above the root); no trailing slash.
 * `undefined` when the escapes are no UTF-8 (invalid or overlong). Only ever compared, never forwarded.
 */
export function comparable(url: string): string | undefined {
  const path = decoded(url.slice(0, indexOrEnd(url, '?', 0)));
  if (path === undefined) return undefined;
  const segments: string[] = [];
  for (const spelt of folded(path).replaceAll('\\', '/').split('/')) {
    const segment = spelt.replace(PARAMETER, '').replace(TRAILING_BLANKS, '');
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

/** Escapes decoded, and compatibility forms decomposed (a fullwidth `％` is a `%`), until neither changes the path. */
function decoded(path: string): string | undefined {
  let previous = path;
  for (let round = 0; round < MAX_DECODINGS; round++) {
    let next: string;
    try {
      next = previous.replace(ESCAPES, decodeURIComponent).normalize('NFKD');
    } catch {
      return undefined; // URIError: the bytes are no UTF-8
    }
    if (next === previous) return next;
    previous = next;
  }
  return undefined;
}

/** Case folded fully (`toUpperCase` first: `ı`→`I`, `ſ`→`S`), marks and invisible characters dropped. */
function folded(path: string): string {
  const bare = (text: string) => text.normalize('NFKD').replace(MARKS, '').replace(INVISIBLE, '');
  return bare(bare(path).toUpperCase().toLowerCase());
}

function indexOrEnd(text: string, char: string, from: number): number {
  const at = text.indexOf(char, from);
  return at === -1 ? text.length : at;
}
