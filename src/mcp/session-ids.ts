import { GatewayError } from '../errors/gateway-error.ts';

/**
 * Reading the session a request belongs to, strictly: the gateway checks the binding of
 * exactly the session the upstream will see, so anything two readers could resolve to
 * different sessions (two headers, two `sessionId` parameters) is refused.
 *
 * Bindings of the two transports live apart (`streamable:` and `legacy:`), so an id issued
 * on one is never accepted on the other.
 */

/** MCP: a session id is visible ASCII (0x21–0x7E). Bounded so a binding key stays small. */
const SESSION_ID = /^[\x21-\x7e]{1,256}$/;

export function isSessionId(value: string): boolean {
  return SESSION_ID.test(value);
}

export function streamableBinding(sessionId: string): string {
  return `streamable:${sessionId}`;
}

export function legacyBinding(sessionId: string): string {
  return `legacy:${sessionId}`;
}

/**
 * The `Mcp-Session-Id` a Streamable HTTP request presents, from the raw headers (Node
 * would join two of them into one value): undefined when there is none.
 */
export function presentedSessionId(rawHeaders: readonly string[]): string | undefined {
  let found: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length !== 14 || rawHeaders[i]!.toLowerCase() !== 'mcp-session-id') continue;
    if (found !== undefined) throw new GatewayError('duplicate_header', 'More than one Mcp-Session-Id header');
    found = rawHeaders[i + 1]!;
  }
  if (found !== undefined && !isSessionId(found)) throw new GatewayError('validation_failed', 'Mcp-Session-Id must be 1 to 256 visible ASCII characters');
  return found;
}

/** The one `sessionId` of a legacy message URL's query string (`?sessionId=…`). */
export function legacySessionIdOfQuery(search: string): string {
  const ids = new URLSearchParams(search).getAll('sessionId');
  if (ids.length !== 1) {
    throw new GatewayError('validation_failed', 'Post messages to the URL of the endpoint event, with its one sessionId parameter');
  }
  if (!isSessionId(ids[0]!)) throw new GatewayError('validation_failed', 'sessionId must be 1 to 256 visible ASCII characters');
  return ids[0]!;
}

/**
 * The session id in the data of a legacy `endpoint` event (a URL, usually relative:
 * `/messages?sessionId=…`), read as the client will read it; undefined when it names none.
 */
export function legacySessionIdOfEndpoint(data: string): string | undefined {
  let url: URL;
  try {
    url = new URL(data.trim(), 'http://gateway.invalid/');
  } catch {
    return undefined;
  }
  const ids = url.searchParams.getAll('sessionId');
  return ids.length === 1 && isSessionId(ids[0]!) ? ids[0] : undefined;
}
