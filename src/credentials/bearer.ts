import { looksLikeKey } from './key-format.ts';

export type BearerCredential =
  | { kind: 'none' }
  | { kind: 'api_key'; token: string }
  | { kind: 'jwt'; token: string }
  | { kind: 'unknown'; token: string }
  /** Not a bearer credential at all (another scheme, bad syntax) or two of them: refused whatever the route. */
  | { kind: 'malformed'; code: 'invalid_credential' | 'duplicate_header'; detail: string };

const BEARER = /^bearer[ \t]+([A-Za-z0-9\-._~+/]+=*)[ \t]*$/i;

/**
 * Extracts the bearer token (scheme case-insensitive, RFC 6750 §2.1) and classifies it by
 * shape, with no I/O. Two Authorization headers are `malformed` (a 400), never "the first one
 * wins" in one place and "the last" in another.
 */
export function extractBearer(header: string | string[] | undefined): BearerCredential {
  if (header === undefined) return { kind: 'none' };
  if (Array.isArray(header)) return { kind: 'malformed', code: 'duplicate_header', detail: 'More than one Authorization header' };
  const match = BEARER.exec(header);
  if (!match) return { kind: 'malformed', code: 'invalid_credential', detail: 'Authorization must be "Bearer <token>"' };
  const token = match[1]!;
  if (looksLikeKey(token)) return { kind: 'api_key', token };
  if (isJwtShape(token)) return { kind: 'jwt', token };
  return { kind: 'unknown', token };
}

function isJwtShape(token: string): boolean {
  const first = token.indexOf('.');
  if (first <= 0) return false;
  const second = token.indexOf('.', first + 1);
  return second > first + 1 && second < token.length - 1 && token.indexOf('.', second + 1) === -1;
}
