/**
 * The one error type of the gateway and its stable codes (docs/security.md, "Refusals").
 * It knows no transport: each code carries the status class its contract fixes, and the
 * renderers beside the transports (`http/problem.ts` for problem+json, `mcp/json-rpc-error.ts`
 * for JSON-RPC) turn it into headers and a body.
 */
export const ERROR_CODES = {
  missing_credential: { status: 401, title: 'Missing credential' },
  invalid_credential: { status: 401, title: 'Invalid credential' },
  expired_credential: { status: 401, title: 'Expired credential' },
  revoked_credential: { status: 401, title: 'Revoked credential' },
  disabled_credential: { status: 401, title: 'Disabled credential' },
  wrong_credential_type: { status: 401, title: 'Wrong credential type' },
  insufficient_scope: { status: 403, title: 'Insufficient scope' },
  agent_mismatch: { status: 403, title: 'Agent mismatch' },
  feature_not_licensed: { status: 403, title: 'Feature not licensed' },
  // An MCP server's own answers (JSON-RPC -32602, -32601): the MCP renderer sends them as the revision's server would.
  unknown_tool: { status: 404, title: 'Unknown tool' },
  method_not_found: { status: 404, title: 'Method not found' },
  method_not_allowed_for_key: { status: 403, title: 'JSON-RPC method not allowed' },
  origin_not_allowed: { status: 403, title: 'Origin not allowed' },
  session_mismatch: { status: 403, title: 'Session belongs to another key' },
  license_limit: { status: 402, title: 'Licence limit reached' },
  key_revoked: { status: 409, title: 'Key revoked' },
  key_expired: { status: 409, title: 'Key expired' },
  key_rotated: { status: 409, title: 'Key rotated' },
  validation_failed: { status: 400, title: 'Validation failed' },
  bad_request: { status: 400, title: 'Bad request' },
  batch_too_large: { status: 400, title: 'JSON-RPC batch too large' },
  ambiguous_path: { status: 400, title: 'Ambiguous request path' },
  duplicate_header: { status: 400, title: 'Duplicate header' },
  header_mismatch: { status: 400, title: 'Header does not match the body' },
  unsupported_protocol_version: { status: 400, title: 'Unsupported MCP protocol version' },
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
