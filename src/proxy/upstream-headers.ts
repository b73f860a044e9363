import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Principal } from '../policy/principal.ts';

/**
 * Headers that describe one connection, not the message (RFC 9110 §7.6.1), in either
 * direction: never passed on. undici frames the upstream request itself (Host from the
 * upstream's origin, Content-Length or chunked), Node frames the client's response.
 */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade'];

/**
 * Client headers that must never reach the upstream or influence it: hop-by-hop ones (and
 * `Expect`, answered here), forwarding metadata only the gateway may set, URL-rewrite headers,
 * and method overrides (some frameworks honour them, which would let a request authorized as
 * GET run as DELETE).
 */
const DROPPED_REQUEST_HEADERS = [
  ...HOP_BY_HOP,
  'host',
  'expect',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-forwarded-prefix',
  'x-forwarded-server',
  'x-real-ip',
  'x-original-url',
  'x-rewrite-url',
  'x-original-uri',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  // Set by the gateway itself.
  'x-request-id',
];

/** Response headers not passed to the client: hop-by-hop, and the request id the gateway answers with. */
const DROPPED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([...HOP_BY_HOP, 'x-request-id']);

/** Identity headers the gateway sets, as a flat `[name, value, …]` list; the upstream may trust them because clients cannot. */
export type IdentityHeaders = readonly string[];

const NO_IDENTITY: IdentityHeaders = Object.freeze([]);

/**
 * The identity headers of a principal. Scope lists are interned (verify/key-state.ts), so a
 * handful of arrays serve every key: their header value is joined once per array and kept
 * here (one per gateway, built in `build()`). Nothing is kept per key, so 100,000 cached
 * keys cost no header memory; the per-request list is a few pointers and V8's cached
 * number strings.
 */
export class IdentityHeaderValues {
  readonly #scopeValues = new WeakMap<readonly string[], string>();

  of(principal: Principal | null): IdentityHeaders {
    if (!principal) return NO_IDENTITY;
    if (principal.kind === 'admin') return ['x-auth-kind', 'admin', 'x-auth-admin-id', String(principal.adminId)];
    const scopes = this.#scopeValue(principal.scopes);
    return principal.agentId === null
      ? ['x-auth-kind', 'api_key', 'x-auth-key-id', String(principal.keyId), 'x-auth-scopes', scopes]
      : ['x-auth-kind', 'api_key', 'x-auth-key-id', String(principal.keyId), 'x-auth-agent-id', String(principal.agentId), 'x-auth-scopes', scopes];
  }

  #scopeValue(scopes: readonly string[]): string {
    let value = this.#scopeValues.get(scopes);
    if (value === undefined) {
      value = scopes.join(' ');
      this.#scopeValues.set(scopes, value);
    }
    return value;
  }
}

export interface ForwardContext {
  identity: IdentityHeaders;
  clientAddress: string;
  protocol: string;
  /** The Host the client used, as received. */
  host: string | undefined;
  /** The request id the gateway logged this request under, passed on as `x-request-id`. */
  requestId: string;
}

/** What the gateway tells the upstream besides the client's headers (fastify's `request.ip` and `protocol`, without trustProxy). */
export function forwardContextOf(request: IncomingMessage, identity: IdentityHeaders, requestId: string): ForwardContext {
  const socket = request.socket;
  return {
    identity,
    clientAddress: socket.remoteAddress ?? '',
    protocol: (socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http',
    host: request.headers.host,
    requestId,
  };
}

export interface UpstreamHeaderOptions {
  forwardAuthorization: boolean;
  /** Client headers dropped besides the usual ones (lower case): the MCP path sends a body of its own. */
  alsoDrop?: readonly string[];
}

/**
 * Builds the headers sent upstream from the client's, as a flat `[name, value, …]` list for
 * undici: everything end-to-end the client sent, minus the dropped headers, client-sent
 * `x-auth-*` and whatever the client's `Connection` names; then the gateway's own forwarding
 * and identity headers, last, so nothing the client sends can remove or replace them.
 */
export function upstreamHeaderRewriter(options: UpstreamHeaderOptions): (headers: IncomingHttpHeaders, context: ForwardContext) => string[] {
  const dropped = new Set([...DROPPED_REQUEST_HEADERS, ...(options.alsoDrop ?? []), ...(options.forwardAuthorization ? [] : ['authorization'])]);
  return function upstreamHeaders(headers, context) {
    const named = connectionNamed(headers.connection);
    const out: string[] = [];
    for (const name in headers) {
      const value = headers[name];
      if (value === undefined || dropped.has(name) || isClientIdentityHeader(name) || named?.has(name)) continue;
      if (typeof value === 'string') out.push(name, value);
      else for (const each of value) out.push(name, each);
    }
    out.push('x-forwarded-for', context.clientAddress, 'x-forwarded-proto', context.protocol);
    if (context.host !== undefined) out.push('x-forwarded-host', context.host);
    out.push('x-request-id', context.requestId);
    const identity = context.identity;
    for (let i = 0; i < identity.length; i++) out.push(identity[i]!);
    return out;
  };
}

/**
 * The upstream's response headers for `writeHead`, as a flat list: hop-by-hop ones and those
 * its `Connection` names are dropped (Node frames the client's response itself), the gateway's
 * `own` fields (flat: a limited key's RateLimit) replace the upstream's of those names, and the
 * gateway's request id is set. A `privateAnswer` (an MCP path's) loses the cache fields for intermediaries too.
 */
export function clientResponseHeaders(headers: IncomingHttpHeaders, requestId: string, own?: readonly string[], privateAnswer = false): string[] {
  const named = connectionNamed(headers.connection);
  const ownNames = own === undefined ? undefined : namesOf(own);
  const out: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || DROPPED_RESPONSE_HEADERS.has(name) || named?.has(name) || ownNames?.includes(name) === true) continue;
    if (privateAnswer && isIntermediaryCacheField(name)) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const each of value) out.push(name, each);
  }
  if (own !== undefined) out.push(...own);
  out.push('x-request-id', requestId);
  return out;
}

/** The names of a flat `[name, value, …]` list. */
export function namesOf(fields: readonly string[]): string[] {
  return fields.filter((_, index) => index % 2 === 0);
}

/**
 * Cache fields that only intermediaries read, each overriding `Cache-Control` where it is
 * read: `CDN-Cache-Control` (RFC 9213) and a CDN's own `<name>-CDN-Cache-Control`
 * (`Cloudflare-CDN-Cache-Control`), `Surrogate-Control`, Akamai's `Edge-Control` and nginx's
 * `X-Accel-Expires`. On an answer for one key alone they would let a CDN share it all the same.
 */
const INTERMEDIARY_CACHE_FIELD = /^(?:(?:[!#$%&'*+.^_`|~0-9a-z-]+-)?cdn-cache-control|surrogate-control|edge-control|x-accel-expires)$/;

/** True for a response field that tells intermediaries how to cache (see `INTERMEDIARY_CACHE_FIELD`); `name` in lower case. */
export function isIntermediaryCacheField(name: string): boolean {
  return INTERMEDIARY_CACHE_FIELD.test(name);
}

/** True for a response header that is passed on to the client (see `clientResponseHeaders`). */
export function isEndToEndResponseHeader(name: string, connection: string | string[] | undefined): boolean {
  return !DROPPED_RESPONSE_HEADERS.has(name) && connectionNamed(connection)?.has(name) !== true;
}

/** The header names a `Connection` header lists (RFC 9110 §7.6.1), undefined for the usual `keep-alive` or `close`. */
function connectionNamed(connection: string | string[] | undefined): ReadonlySet<string> | undefined {
  if (connection === undefined) return undefined;
  const text = (typeof connection === 'string' ? connection : connection.join(',')).toLowerCase();
  if (text === 'keep-alive' || text === 'close') return undefined;
  const names = new Set<string>();
  for (const token of text.split(',')) {
    const name = token.trim();
    if (name !== '') names.add(name);
  }
  return names;
}

/** `x-auth-*` in any case (Node lowercases names) and with `_` for `-`: some servers fold `_` into `-`. */
const CLIENT_IDENTITY_HEADER = /^x[-_]auth[-_]/;

function isClientIdentityHeader(name: string): boolean {
  return name.charCodeAt(0) === 120 /* x */ && CLIENT_IDENTITY_HEADER.test(name);
}
