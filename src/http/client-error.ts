import type { Socket } from 'node:net';
import { GatewayError, problemFor, type ErrorCode } from './errors.ts';

/** Node's HTTP parser errors that mean the header section was too big: 431, not 400. */
const HEADER_OVERFLOW = new Set(['HPE_HEADER_OVERFLOW']);

/**
 * Requests Node's parser refuses before fastify sees them (both `Content-Length` and
 * `Transfer-Encoding`, two `Content-Length`s, obs-fold, bare CR, oversized headers) still get
 * a problem+json answer, then the connection is closed: after a framing error nothing more on
 * it can be trusted, so nothing on it is forwarded.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const code: ErrorCode = error.code !== undefined && HEADER_OVERFLOW.has(error.code) ? 'headers_too_large' : 'bad_request';
  const detail = code === 'headers_too_large' ? 'The request headers are too large' : 'The request could not be parsed as HTTP/1.1';
  const problem = problemFor(new GatewayError(code, detail));
  const body = JSON.stringify(problem.body);
  const head = [
    `HTTP/1.1 ${problem.status} ${problem.body.title}`,
    'Content-Type: application/problem+json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
}
