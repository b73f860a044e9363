import { ERROR_CODES, GatewayError, type ErrorCode } from '../errors/gateway-error.ts';
import type { LimitKind } from './rate-limits.ts';

export interface Allow {
  readonly allow: true;
}

/**
 * A refusal, as a value (docs/architecture.md, "One pipeline"): what `decide()` and
 * authentication answer instead of throwing. `status` is `ERROR_CODES[code].status`.
 */
export interface Deny {
  readonly allow: false;
  readonly code: ErrorCode;
  readonly status: number;
  readonly detail: string;
  /** The scope that was needed, for `WWW-Authenticate: … scope="…"` (space-separated when any one would do). */
  readonly scope?: string;
  /** Seconds, for `Retry-After` (a throttled key prefix). */
  readonly retryAfter?: number;
  /** Methods the path serves, for the `Allow` header of a 405. */
  readonly allowedMethods?: readonly string[];
  /** Field-level problems of a `validation_failed`. */
  readonly errors?: ReadonlyArray<{ field: string; message: string }>;
  /** MCP: position in the batch (0 for a single message) of the message refused. */
  readonly messageIndex?: number;
  /** MCP: the refused message's JSON-RPC `id` (`null` when invalid; absent for a notification or a non-object). */
  readonly messageId?: string | number | null;
  /** MCP `unsupported_protocol_version`: the revision the client asked for, as the revision's error reports it. */
  readonly requested?: string;
  /** `rate_limited` before anything was counted (a batch over a whole limit): the limit that can never admit it. */
  readonly limit?: LimitKind;
}

type DenyDetails = Pick<Deny, 'scope' | 'retryAfter' | 'allowedMethods' | 'errors'>;

/** The one allow value: the allow path allocates nothing. */
export const ALLOW: Allow = Object.freeze({ allow: true });

export function deny(code: ErrorCode, detail: string, details?: DenyDetails): Deny {
  const status = ERROR_CODES[code].status;
  return details === undefined ? { allow: false, code, status, detail } : { allow: false, code, status, detail, ...details };
}

/** A refusal raised as an error by a component (the key verifier, the session tokens), as a value. */
export function denialOf(error: GatewayError): Deny {
  return deny(error.code, error.message, {
    ...(error.scope === undefined ? {} : { scope: error.scope }),
    ...(error.retryAfter === undefined ? {} : { retryAfter: error.retryAfter }),
    ...(error.allow === undefined ? {} : { allowedMethods: error.allow }),
    ...(error.errors === undefined ? {} : { errors: error.errors }),
  });
}

/** The error a transport renders for a refusal. */
export function errorOf(denial: Deny): GatewayError {
  return new GatewayError(denial.code, denial.detail, {
    ...(denial.scope === undefined ? {} : { scope: denial.scope }),
    ...(denial.retryAfter === undefined ? {} : { retryAfter: denial.retryAfter }),
    ...(denial.allowedMethods === undefined ? {} : { allow: denial.allowedMethods }),
    ...(denial.errors === undefined ? {} : { errors: denial.errors }),
  });
}
