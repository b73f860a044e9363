import { GatewayError, type ErrorCode } from '../errors/gateway-error.ts';
import { problemFor } from '../http/problem.ts';

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
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data: { code: ErrorCode; status: number; detail: string; scope?: string };
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
 * JSON-RPC error codes. The stable code is in `error.data.code`; the number only tells a
 * generic client which family it is (-32700 and -32600 are JSON-RPC's own, the rest are in
 * the range JSON-RPC leaves to implementations; -32001 is what MCP servers answer for an
 * unknown session).
 */
function rpcCodeOf(code: ErrorCode, status: number): number {
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
export function mcpRefusalResponse(refusal: McpRefusal, messages?: readonly unknown[], batch = false): McpRefusalResponse {
  const error = new GatewayError(refusal.code, refusal.detail, {
    ...(refusal.scope === undefined ? {} : { scope: refusal.scope }),
    ...(refusal.allowedMethods === undefined ? {} : { allow: refusal.allowedMethods }),
  });
  const problem = problemFor(error);
  const headers: Record<string, string> = { ...problem.headers, 'content-type': 'application/json; charset=utf-8' };
  const errorObject = (detail: string): JsonRpcErrorObject => ({
    code: rpcCodeOf(refusal.code, problem.status),
    message: detail,
    data: { code: refusal.code, status: problem.status, detail, ...(refusal.scope === undefined ? {} : { scope: refusal.scope }) },
  });
  const index = refusal.messageIndex;
  if (!batch || messages === undefined) {
    const id = messages === undefined ? null : (idOf(messages[0]) ?? null);
    return { status: problem.status, headers, body: JSON.stringify(response(id, errorObject(refusal.detail))) };
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
  return { status: problem.status, headers, body: JSON.stringify(body) };
}

/** A refusal of a whole request (no message to answer): `id` null. */
export function mcpRequestRefusal(error: GatewayError): McpRefusalResponse {
  return mcpRefusalResponse({ code: error.code, detail: error.message, scope: error.scope, allowedMethods: error.allow });
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
