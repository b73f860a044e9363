import { ERROR_CODES, type ErrorCode, type GatewayError } from '../errors/gateway-error.ts';

/**
 * The problem+json renderer (RFC 9457): the only place a GatewayError becomes a status,
 * headers and a body on the HTTP transports (docs/security.md, "Refusals").
 */
export interface Problem {
  status: number;
  headers: Record<string, string>;
  body: {
    type: string;
    title: string;
    status: number;
    detail: string;
    code: ErrorCode;
    instance?: string;
    errors?: ReadonlyArray<{ field: string; message: string }>;
  };
}

export const PROBLEM_TYPE_BASE = 'https://gatehouse.dev/problems/';

/** Maps an error to its problem+json response: the only place codes become statuses and headers. */
export function problemFor(error: GatewayError, instance?: string): Problem {
  const { status, title } = ERROR_CODES[error.code];
  const headers: Record<string, string> = { 'content-type': 'application/problem+json; charset=utf-8' };
  const challenge = wwwAuthenticate(error);
  if (challenge) headers['www-authenticate'] = challenge;
  if (error.allow) headers.allow = error.allow.join(', ');
  if (error.retryAfter !== undefined) headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfter)));
  const body: Problem['body'] = {
    type: PROBLEM_TYPE_BASE + error.code.replaceAll('_', '-'),
    title,
    status,
    detail: error.message,
    code: error.code,
  };
  if (instance !== undefined) body.instance = instance;
  if (error.errors?.length) body.errors = error.errors;
  return { status, headers, body };
}

/** 403s that no other credential or scope would change: a challenge would send a client (the MCP SDK's step-up) after one. */
const NO_CHALLENGE: ReadonlySet<ErrorCode> = new Set(['origin_not_allowed', 'method_not_allowed_for_key']);

function wwwAuthenticate(error: GatewayError): string | undefined {
  if (error.status === 401) {
    if (error.code === 'missing_credential') return 'Bearer realm="gatehouse"';
    return `Bearer realm="gatehouse", error="invalid_token", error_description="${quote(error.message)}"`;
  }
  // Not about what the credential may do: a page's origin, or client responses no scope opens.
  if (error.status === 403 && !NO_CHALLENGE.has(error.code)) {
    const scope = error.scope ? `, scope="${quote(error.scope)}"` : '';
    return `Bearer realm="gatehouse", error="insufficient_scope"${scope}`;
  }
  return undefined;
}

/** RFC 7235 quoted-string: drop characters that cannot appear in a header value. */
function quote(text: string): string {
  return text.replace(/[\\"]/g, '').replace(/[^\x20-\x7e]/g, '');
}
