import { GatewayError, type ErrorCode } from '../errors/gateway-error.ts';
import { problemFor } from '../http/problem.ts';
import { STATELESS_REVISION, STATELESS_REVISIONS } from '../policy/mcp-revisions.ts';

/**
 * How a refusal looks on an MCP path once the key may use MCP at all (docs/mcp.md,
 * "What a denial looks like"): the HTTP status and `WWW-Authenticate` of the problem+json answer, with a
 * JSON-RPC error response as the body, answering the refused message's `id`, and the
 * stable code in `error.data.code`.
 */
export interface McpRefusal {
  readonly code: ErrorCode;
  readonly detail: string;
  /** The scope that was needed (`WWW-Authenticate: … scope="…"`). */
  readonly scope?: string | undefined;
  /** Position in the body of the message refused (0 for a single message); absent when the body as a whole was. */
  readonly messageIndex?: number | undefined;
  /** Methods the path serves, for the `Allow` header of a 405. */
  readonly allowedMethods?: readonly string[] | undefined;
  /** `unsupported_protocol_version`: the revision asked for. */
  readonly requested?: string | undefined;
  /** Seconds, for `Retry-After` (`rate_limited`). */
  readonly retryAfter?: number | undefined;
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data: { code: ErrorCode; status: number; detail: string; scope?: string; supported?: readonly string[]; requested?: string; retry_after?: number };
}

export interface JsonRpcErrorResponse {
  jsonrpc: '2.0';
  id: string | number | null;
  error: JsonRpcErrorObject;
}

export interface McpRefusalResponse {
  status: number;
  headers: Record<string, string>;
  /** Serialised JSON: one error response, or an array of them for a batch. */
  body: string;
}

/**
 * The JSON-RPC error codes that MCP defines for what the gateway answers in a tool server's
 * place: JSON-RPC's own method-not-found and invalid-params, and the 2026-07-28 revision's
 * header mismatch and unsupported protocol version (basic/index, "Error Codes").
 */
const MCP_CODES: Partial<Record<ErrorCode, number>> = {
  method_not_found: -32601,
  unknown_tool: -32602,
  header_mismatch: -32020,
  unsupported_protocol_version: -32022,
};

/**
 * JSON-RPC error codes. The stable code is in `error.data.code`; the number only tells a
 * generic client which family it is (-32700 and -32600 are JSON-RPC's own, the rest are in
 * the range JSON-RPC leaves to implementations; -32001 is what MCP servers answer for an
 * unknown session), except where MCP defines the code (`MCP_CODES`).
 */
function rpcCodeOf(code: ErrorCode, status: number): number {
  const defined = MCP_CODES[code];
  if (defined !== undefined) return defined;
  if (code === 'bad_request') return -32700;
  if (code === 'not_found') return -32001;
  if (status === 401) return -32002;
  if (status === 403) return -32003;
  if (status >= 400 && status < 500) return -32600;
  return -32000;
}

/**
 * The response refusing a posted body. `messages` are the parsed messages when the body
 * could be parsed. For a batch, every request in it is answered (none was forwarded): the
 * refused one with the refusal, the others saying why they were not forwarded.
 */
/** What decides the HTTP status of an answer given in a tool server's place. */
export interface RefusalContext {
  /** The request's `MCP-Protocol-Version`. */
  readonly revision?: string | undefined;
  /**
   * The legacy transport's POST (2024-11-05): its server answers every message on the event
   * stream, so a client reads a refusal only as an HTTP error of the POST.
   */
  readonly answersOnStream?: boolean | undefined;
}

export function mcpRefusalResponse(refusal: McpRefusal, messages?: readonly unknown[], batch = false, context: RefusalContext = {}): McpRefusalResponse {
  const error = new GatewayError(refusal.code, refusal.detail, {
    ...(refusal.scope === undefined ? {} : { scope: refusal.scope }),
    ...(refusal.allowedMethods === undefined ? {} : { allow: refusal.allowedMethods }),
    ...(refusal.retryAfter === undefined ? {} : { retryAfter: refusal.retryAfter }),
  });
  const problem = problemFor(error);
  // A body of notifications only, refused: the revisions ask for an HTTP error status, as there is no request to answer.
  const answersRequest = messages !== undefined && messages.some((message) => idOf(message) !== undefined && isRequest(message));
  const status = context.answersOnStream === true || !answersRequest ? problem.status : httpStatusOf(refusal.code, problem.status, context.revision);
  const headers: Record<string, string> = { ...problem.headers, 'content-type': 'application/json; charset=utf-8' };
  const errorObject = (detail: string): JsonRpcErrorObject => ({
    code: rpcCodeOf(refusal.code, problem.status),
    message: detail,
    data: {
      code: refusal.code,
      status,
      detail,
      ...(refusal.scope === undefined ? {} : { scope: refusal.scope }),
      ...(problem.headers['retry-after'] === undefined ? {} : { retry_after: Number(problem.headers['retry-after']) }),
      ...versionData(refusal),
    },
  });
  const index = refusal.messageIndex;
  if (!batch || messages === undefined) {
    const id = messages === undefined ? null : (idOf(messages[0]) ?? null);
    return { status, headers, body: JSON.stringify(response(id, errorObject(refusal.detail))) };
  }
  const answers: JsonRpcErrorResponse[] = [];
  messages.forEach((message, position) => {
    const id = idOf(message);
    if (position === index) answers.push(response(id ?? null, errorObject(refusal.detail)));
    else if (id !== undefined && isRequest(message) && index === undefined) answers.push(response(id, errorObject(refusal.detail)));
    else if (id !== undefined && isRequest(message)) {
      answers.push(response(id, errorObject(`Not forwarded: message ${index} of the batch was refused (${refusal.detail})`)));
    }
  });
  // JSON-RPC answers a batch of notifications with nothing; a refusal still needs a body.
  const body = answers.length === 0 ? response(null, errorObject(refusal.detail)) : answers;
  return { status, headers, body: JSON.stringify(body) };
}

/**
 * The HTTP status of an answer given in a tool server's place is the one that server gives:
 * a JSON-RPC error in a `200` for an unknown tool, and for an unknown method too before
 * 2026-07-28, which answers that one with `404` (transports, "Protocol Version Header").
 */
function httpStatusOf(code: ErrorCode, status: number, revision: string | undefined): number {
  if (code === 'unknown_tool') return 200;
  if (code === 'method_not_found') return revision === STATELESS_REVISION ? 404 : 200;
  return status;
}

/**
 * The revision's `UnsupportedProtocolVersionError` data: what was asked for, and the
 * revisions a client selects by this header alone, to retry with. Those are the stateless
 * ones: an earlier revision is negotiated by `initialize`, and a client checks the list
 * against what `server/discover` advertised, which names only stateless revisions.
 */
function versionData(refusal: McpRefusal): Pick<JsonRpcErrorObject['data'], 'supported' | 'requested'> {
  if (refusal.code !== 'unsupported_protocol_version') return {};
  return { supported: STATELESS_REVISIONS, requested: refusal.requested ?? '' };
}

/** A refusal of a whole request (no message to answer): `id` null. */
export function mcpRequestRefusal(error: GatewayError): McpRefusalResponse {
  return mcpRefusalResponse({ code: error.code, detail: error.message, scope: error.scope, allowedMethods: error.allow, retryAfter: error.retryAfter });
}

function response(id: string | number | null, error: JsonRpcErrorObject): JsonRpcErrorResponse {
  return { jsonrpc: '2.0', id, error };
}

/** A message's `id` when it is a valid one (string or number); undefined when it has none or an invalid one. */
function idOf(message: unknown): string | number | undefined {
  if (typeof message !== 'object' || message === null || !Object.hasOwn(message, 'id')) return undefined;
  const id = (message as { id: unknown }).id;
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}

function isRequest(message: unknown): boolean {
  return typeof message === 'object' && message !== null && typeof (message as { method?: unknown }).method === 'string';
}
