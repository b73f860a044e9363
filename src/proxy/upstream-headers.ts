import type { IncomingHttpHeaders } from 'node:http';
import type { Principal } from '../policy/principal.ts';

/** Identity headers the gateway sets; the upstream may trust them because clients cannot. */
export type IdentityHeaders = Readonly<Record<string, string>>;

/**
 * Client headers that must never reach the upstream or influence it: forwarding metadata
 * only the gateway may set, URL-rewrite headers, and method overrides (some frameworks
 * honour them, which would let a request authorized as GET run as DELETE).
 */
const DROPPED = new Set([
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
]);

const identityCache = new WeakMap<Principal, IdentityHeaders>();

/** The identity headers of a principal, computed once per cached principal object. */
export function identityHeadersOf(principal: Principal | null): IdentityHeaders {
  if (!principal) return {};
  let headers = identityCache.get(principal);
  if (!headers) {
    headers =
      principal.kind === 'admin'
        ? { 'x-auth-kind': 'admin', 'x-auth-admin-id': String(principal.adminId) }
        : {
            'x-auth-kind': 'api_key',
            'x-auth-key-id': String(principal.keyId),
            ...(principal.agentId === null ? {} : { 'x-auth-agent-id': String(principal.agentId) }),
            'x-auth-scopes': principal.scopes.join(' '),
          };
    identityCache.set(principal, Object.freeze(headers));
  }
  return headers;
}

export interface ForwardContext {
  identity: IdentityHeaders;
  clientAddress: string;
  protocol: string;
  /** The Host the client used, as received. */
  host: string | undefined;
  forwardAuthorization: boolean;
  /** The request id the gateway logged this request under, passed on as `x-request-id`. */
  requestId?: string;
}

/**
 * Rewrites the headers sent upstream, in place: reply-from has already dropped `Connection`
 * and every header it names, so nothing added here can be removed by the client.
 */
export function rewriteUpstreamHeaders(headers: IncomingHttpHeaders, context: ForwardContext): IncomingHttpHeaders {
  for (const name of Object.keys(headers)) {
    if (isClientIdentityHeader(name) || DROPPED.has(name)) delete headers[name];
  }
  if (!context.forwardAuthorization) delete headers.authorization;
  headers['x-forwarded-for'] = context.clientAddress;
  headers['x-forwarded-proto'] = context.protocol;
  if (context.host !== undefined) headers['x-forwarded-host'] = context.host;
  if (context.requestId !== undefined) headers['x-request-id'] = context.requestId;
  Object.assign(headers, context.identity);
  return headers;
}

/** `x-auth-*` in any case (Node lowercases names) and with `_` for `-`: some servers fold `_` into `-`. */
const CLIENT_IDENTITY_HEADER = /^x[-_]auth[-_]/;

function isClientIdentityHeader(name: string): boolean {
  return CLIENT_IDENTITY_HEADER.test(name);
}
