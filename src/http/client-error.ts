import type { Socket } from 'node:net';
import { GatewayError, type ErrorCode } from '../errors/gateway-error.ts';
import { problemFor } from './problem.ts';

/** Node's HTTP parser errors that mean the header section was too big: 431, not 400. */
const HEADER_OVERFLOW: ReadonlySet<string> = new Set(['HPE_HEADER_OVERFLOW']);
/** Node's `headersTimeout` or `requestTimeout` ran out (HEADERS_TIMEOUT, REQUEST_TIMEOUT): 408. */
const REQUEST_TIMEOUT = 'ERR_HTTP_REQUEST_TIMEOUT';

type ClientSocket = Socket & { _httpMessage?: { headersSent?: boolean } | null };

/**
 * Requests Node's parser refuses before fastify sees them (both `Content-Length` and
 * `Transfer-Encoding`, two `Content-Length`s, obs-fold, bare CR, oversized headers) still get
 * a problem+json answer, then the connection is closed: after a framing error nothing more on
 * it can be trusted, so nothing on it is forwarded.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: ClientSocket): void {
  // An answer already under way on this connection cannot be followed by another: the connection just ends.
  if (!socket.writable || socket._httpMessage?.headersSent === true) {
    socket.destroy();
    return;
  }
  if (error.code === REQUEST_TIMEOUT) {
    // As Node's own handler does: the answer, then the connection is destroyed, so a request body
    // still streaming upstream is aborted there rather than left waiting for bytes that never come.
    socket.write(rawAnswer(new GatewayError('request_timeout', 'The request did not arrive in time')));
    socket.destroy();
    return;
  }
  const code: ErrorCode = error.code !== undefined && HEADER_OVERFLOW.has(error.code) ? 'headers_too_large' : 'bad_request';
  const detail = code === 'headers_too_large' ? 'The request headers are too large' : 'The request could not be parsed as HTTP/1.1';
  socket.end(rawAnswer(new GatewayError(code, detail)));
}

/** A problem+json answer written straight to the socket, with `Connection: close`. */
function rawAnswer(error: GatewayError): string {
  const problem = problemFor(error);
  const body = JSON.stringify(problem.body);
  const head = [
    `HTTP/1.1 ${problem.status} ${problem.body.title}`,
    'Content-Type: application/problem+json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
  ];
  return `${head.join('\r\n')}\r\n\r\n${body}`;
}
