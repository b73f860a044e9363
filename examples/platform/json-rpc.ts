import type { ServerResponse } from 'node:http';

/** A JSON-RPC error message, as the platform's own refusals carry it. */
export function jsonRpcError(code: number, message: string, id: string | number | null = null): object {
  return { jsonrpc: '2.0', error: { code, message }, id };
}

/** An answer the platform gives before any SDK sees the request: the same for both SDK generations. */
export interface CannedAnswer {
  status: number;
  headers: Record<string, string>;
  body: object;
}

const JSON_TYPE = { 'content-type': 'application/json' };

/** Stateful: an `Mcp-Session-Id` the endpoint does not know (ended, or never opened). */
export const SESSION_NOT_FOUND: CannedAnswer = { status: 404, headers: JSON_TYPE, body: jsonRpcError(-32001, 'Session not found') };

/** Stateful: no session id on anything but an `initialize` POST. */
export const NO_SESSION: CannedAnswer = { status: 400, headers: JSON_TYPE, body: jsonRpcError(-32000, 'Bad Request: No valid session ID provided') };

/** Stateless: no session, so no standalone GET stream and nothing to DELETE. */
export const STATELESS_POST_ONLY: CannedAnswer = { status: 405, headers: { ...JSON_TYPE, allow: 'POST' }, body: jsonRpcError(-32000, 'Method not allowed.') };

export function sendCanned(response: ServerResponse, { status, headers, body }: CannedAnswer): void {
  response.writeHead(status, headers);
  response.end(JSON.stringify(body));
}
