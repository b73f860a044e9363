import { GATEWAY_RATE_LIMIT_FIELDS, hasGatewayRateLimit } from '../http/rate-limit-headers.ts';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { GatewayError } from '../errors/gateway-error.ts';
import { isEndToEndResponseHeader, isIntermediaryCacheField } from '../proxy/upstream-headers.ts';
import { inspectAnswerBytes, type AnswerRules } from './answer-inspection.ts';
import { answerTypeOf } from './media-type.ts';

/**
 * An upstream answer on an MCP path that is not an event stream: read whole (up to a bound),
 * checked, and only then sent (docs/security.md, "Holding under abuse": odd upstream answers).
 *  - no body (204, 304, `Content-Length: 0`, or a body that turns out empty): passed on as it is;
 *  - JSON: inspected (`answer-inspection.ts`) and sent re-serialised, as `application/json`;
 *  - anything else, or an encoded body: `502 upstream_unavailable` — except, on the legacy
 *    messages path, a short plain-text acknowledgement (the SDK's `202 Accepted`) in which no
 *    JSON parser could find an object or an array.
 * The upstream's status is kept in every case that passes, error statuses included: their
 * bodies are checked the same way, as a careless client may parse them all the same.
 */
export interface CheckedAnswer {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  /** The whole body, as received (at most the bound the reader was given: `readWhole`). */
  readonly body: Buffer;
}

export interface CheckedAnswerOptions {
  readonly rules: AnswerRules;
  /** The legacy messages path, where a plain-text acknowledgement may pass. */
  readonly acknowledgements: boolean;
}

/** Whether the answer has no body at all, so nothing in it needs reading. */
export function hasNoBody(statusCode: number, headers: IncomingHttpHeaders): boolean {
  return statusCode === 204 || statusCode === 304 || headers['content-length'] === '0';
}

/**
 * The `Cache-Control` of every upstream answer on an MCP path, whatever the upstream sent
 * (docs/mcp.md, "Answers are never shared-cacheable"): each answers one key's request, a
 * filtered tools list above all, and an upstream's `public` would let a shared cache keep it
 * for another key's identical request (RFC 9111 §3.5). `no-transform` is what the SDK servers
 * send on their event streams: no intermediary buffers or recompresses what the gateway checked.
 */
export const MCP_ANSWER_CACHE_CONTROL = 'no-store, no-transform';

/**
 * The upstream's status and end-to-end headers on the client's response, with the request id
 * and the gateway's `Cache-Control`; the upstream's cache fields for CDNs (`CDN-Cache-Control`, …) dropped.
 */
export function writeAnswerHead(response: ServerResponse, statusCode: number, headers: IncomingHttpHeaders, requestId: string): void {
  response.statusCode = statusCode;
  // A limited key's answer tells the gateway's limits; the upstream's fields of those names would contradict them.
  const owned = hasGatewayRateLimit(response) ? GATEWAY_RATE_LIMIT_FIELDS : undefined;
  for (const name in headers) {
    if (isEndToEndResponseHeader(name, headers.connection) && owned?.has(name) !== true && !isIntermediaryCacheField(name)) response.setHeader(name, headers[name]!);
  }
  response.setHeader('cache-control', MCP_ANSWER_CACHE_CONTROL);
  response.setHeader('x-request-id', requestId);
}

/** Checks and sends the answer; throws (nothing sent) a GatewayError when it cannot be passed on. */
export function sendCheckedAnswer(response: ServerResponse, requestId: string, answer: CheckedAnswer, options: CheckedAnswerOptions): void {
  const { statusCode, headers } = answer;
  const type = answerTypeOf(headers['content-type']);
  // Nothing to inspect in a type the gateway does not read, unless it may be an acknowledgement.
  if (type === 'other' && !options.acknowledgements && answer.body.length > 0) throw cannotInspect(statusCode, headers);
  const bytes = answer.body;
  if (bytes.length === 0) {
    writeAnswerHead(response, statusCode, headers, requestId);
    response.end();
    return;
  }
  if (!isIdentityEncoding(headers['content-encoding'])) {
    throw new GatewayError('upstream_unavailable', 'The upstream sent an encoded answer the gateway cannot inspect');
  }
  let body: string | Uint8Array;
  if (type === 'json') {
    const inspection = inspectAnswerBytes(bytes, options.rules);
    if (!inspection.ok) throw new GatewayError('upstream_unavailable', `The upstream's answer was not passed on: ${inspection.reason}`);
    body = inspection.serialized;
  } else if (options.acknowledgements && isPlainAcknowledgement(bytes)) {
    body = bytes;
  } else throw cannotInspect(statusCode, headers);
  writeAnswerHead(response, statusCode, headers, requestId);
  // What was checked is what the client is told it gets: JSON as JSON, an acknowledgement as plain
  // text whatever the upstream called it (never HTML a browser would render, nor sniffed as such).
  if (type === 'json') response.setHeader('content-type', 'application/json');
  else {
    response.setHeader('content-type', 'text/plain; charset=utf-8');
    response.setHeader('x-content-type-options', 'nosniff');
  }
  response.setHeader('content-length', typeof body === 'string' ? Buffer.byteLength(body) : body.length);
  response.end(body);
}

function cannotInspect(statusCode: number, headers: IncomingHttpHeaders): GatewayError {
  const type = headers['content-type'];
  const said = type === undefined ? 'no Content-Type' : `Content-Type ${JSON.stringify(type)}`;
  return new GatewayError('upstream_unavailable', `The upstream answered ${statusCode} with ${said}, which the gateway cannot inspect`);
}

/**
 * Printable ASCII without `{`, `[` or `+`: no JSON parser, however lenient, reads an object or
 * an array out of it, and no charset a client might guess (UTF-16, UTF-7's `+AHs-`) makes one.
 */
function isPlainAcknowledgement(bytes: Uint8Array): boolean {
  for (const byte of bytes) {
    if (byte === 0x7b || byte === 0x5b || byte === 0x2b) return false;
    if ((byte < 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) || byte > 0x7e) return false;
  }
  return true;
}

/** No Content-Encoding, or `identity`: the body reads as it is. */
export function isIdentityEncoding(value: string | string[] | undefined): boolean {
  if (value === undefined) return true;
  if (typeof value !== 'string') return false;
  const text = value.trim().toLowerCase();
  return text === '' || text === 'identity';
}
