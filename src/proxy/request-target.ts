import { GatewayError } from '../errors/gateway-error.ts';

/**
 * The request target is decided once and forwarded as it is: never decoded, never
 * normalised behind the decision's back. Anything another parser could read as a
 * different path is refused with 400 instead of guessed at:
 *  - not origin-form (absolute-form `http://…`, asterisk-form, authority-form);
 *  - a fragment `#`, a `;` parameter, a backslash, control characters or spaces;
 *  - empty segments (`//`) and dot segments (`/./`, `/../`, trailing `/.` or `/..`);
 *  - percent-encoded `/`, `\`, NUL, or any unreserved character (`%2e`, `%41`, …: RFC 3986
 *    §6.2.2.2 says they mean the same as the plain character, so they only serve to disguise);
 *  - a `%` not followed by two hex digits.
 */
const AMBIGUOUS_PATH =
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  /[#;\\\x00-\x20\x7f-\uffff]|\/\/|\/\.{1,2}(?:\/|$)|%(?![0-9A-Fa-f]{2})|%(?:00|2[DdEeFf]|3[0-9]|4[1-9A-Fa-f]|5[0-9AaCcFf]|6[1-9A-Fa-f]|7[0-9AaEe])/;

export interface RequestTarget {
  /** The path exactly as received and as it will be forwarded. */
  path: string;
  /** `?` and what follows, or the empty string. */
  search: string;
}

export function parseRequestTarget(url: string): RequestTarget {
  if (url.charCodeAt(0) !== 47 /* / */) {
    throw new GatewayError('ambiguous_path', 'The request target must be an absolute path (origin-form)');
  }
  const queryAt = url.indexOf('?');
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  const search = queryAt === -1 ? '' : url.slice(queryAt);
  if (AMBIGUOUS_PATH.test(path) || search.includes('#')) {
    throw new GatewayError('ambiguous_path', 'The request path is ambiguous (encoded separators, dot segments or similar)');
  }
  return { path, search };
}
