/**
 * The one error type of the gateway. Handlers and the decision throw or return
 * a code; `problemFor` is the single place that turns a code into a status,
 * headers and body (docs/security.md, "Refusals"; RFC 9457).
 */
export const ERROR_CODES = {
  missing_credential: { status: 401, title: 'Missing credential' },
  invalid_credential: { status: 401, title: 'Invalid credential' },
  expired_credential: { status: 401, title: 'Expired credential' },
  revoked_credential: { status: 401, title: 'Revoked credential' },
  wrong_credential_type: { status: 401, title: 'Wrong credential type' },
  insufficient_scope: { status: 403, title: 'Insufficient scope' },
  agent_mismatch: { status: 403, title: 'Agent mismatch' },
  feature_not_licensed: { status: 403, title: 'Feature not licensed' },
  unknown_tool: { status: 403, title: 'Unknown tool' },
  method_not_allowed_for_key: { status: 403, title: 'JSON-RPC method not allowed' },
  session_mismatch: { status: 403, title: 'Session belongs to another key' },
  license_limit: { status: 402, title: 'Licence limit reached' },
  validation_failed: { status: 400, title: 'Validation failed' },
  bad_request: { status: 400, title: 'Bad request' },
  batch_too_large: { status: 400, title: 'JSON-RPC batch too large' },
  ambiguous_path: { status: 400, title: 'Ambiguous request path' },
  duplicate_header: { status: 400, title: 'Duplicate header' },
  not_found: { status: 404, title: 'Not found' },
  request_timeout: { status: 408, title: 'Request timeout' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  headers_too_large: { status: 431, title: 'Request header fields too large' },
  rate_limited: { status: 429, title: 'Too many requests' },
  too_many_streams: { status: 429, title: 'Too many open streams' },
  upstream_unavailable: { status: 502, title: 'Upstream unavailable' },
  upstream_timeout: { status: 504, title: 'Upstream timeout' },
  store_unavailable: { status: 503, title: 'Store unavailable' },
  internal_error: { status: 500, title: 'Internal error' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface GatewayErrorOptions {
  /** Scope the caller lacked, for `WWW-Authenticate: Bearer error="insufficient_scope", scope="…"`. */
  scope?: string;
  /** Seconds, for `Retry-After` on 429. */
  retryAfter?: number;
  /** Field-level problems for `validation_failed`. */
  errors?: ReadonlyArray<{ field: string; message: string }>;
  /** Methods for the `Allow` header of a 405. */
  allow?: readonly string[];
  cause?: unknown;
}

export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly scope: string | undefined;
  readonly retryAfter: number | undefined;
  readonly errors: GatewayErrorOptions['errors'];
  readonly allow: readonly string[] | undefined;

  constructor(code: ErrorCode, detail?: string, options: GatewayErrorOptions = {}) {
    // A refusal (4xx) is an answer, not a fault: its stack is never logged or shown, and under a
    // flood of wrong keys capturing it was 2–4% of the gateway's CPU (`--cpu-prof`). Failures keep theirs.
    const stackTraceLimit = Error.stackTraceLimit;
    if (ERROR_CODES[code].status < 500) Error.stackTraceLimit = 0;
    try {
      super(detail ?? ERROR_CODES[code].title, options.cause === undefined ? undefined : { cause: options.cause });
    } finally {
      Error.stackTraceLimit = stackTraceLimit;
    }
    this.name = 'GatewayError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    this.scope = options.scope;
    this.retryAfter = options.retryAfter;
    this.errors = options.errors;
    this.allow = options.allow;
  }
}

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

function wwwAuthenticate(error: GatewayError): string | undefined {
  if (error.status === 401) {
    if (error.code === 'missing_credential') return 'Bearer realm="gatehouse"';
    return `Bearer realm="gatehouse", error="invalid_token", error_description="${quote(error.message)}"`;
  }
  if (error.status === 403) {
    const scope = error.scope ? `, scope="${quote(error.scope)}"` : '';
    return `Bearer realm="gatehouse", error="insufficient_scope"${scope}`;
  }
  return undefined;
}

/** RFC 7235 quoted-string: drop characters that cannot appear in a header value. */
function quote(text: string): string {
  return text.replace(/[\\"]/g, '').replace(/[^\x20-\x7e]/g, '');
}
