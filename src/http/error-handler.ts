import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { StoreUnavailableError } from '../store/unavailable.ts';
import { GatewayError, type ErrorCode } from '../errors/gateway-error.ts';
import { problemFor } from './problem.ts';
import { refusalFields, type RefusalSubject } from './refusal-log.ts';

/** Fastify's own client-error codes, mapped to ours so that no client mistake becomes a 500. */
const FASTIFY_CODES: Record<string, { code: ErrorCode; detail: string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'unsupported_media_type', detail: 'Send the body as application/json' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'bad_request', detail: 'Content-Length does not match the body' },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large', detail: 'The request body is too large' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'bad_request', detail: 'The JSON body is empty' },
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'bad_request', detail: 'The body is not valid JSON' },
  FST_ERR_CTP_INVALID_TYPE: { code: 'unsupported_media_type', detail: 'Unsupported Content-Type' },
};

/** Turns any error into a response: GatewayError by its code, fastify's client errors by table, the rest 500. */
export function toGatewayError(error: FastifyError | Error): GatewayError {
  if (error instanceof GatewayError) return error;
  if (error instanceof StoreUnavailableError) return new GatewayError('store_unavailable', 'The store cannot be reached; retry later', { cause: error });
  const fastifyError = error as FastifyError;
  const known = fastifyError.code ? FASTIFY_CODES[fastifyError.code] : undefined;
  if (known) return new GatewayError(known.code, known.detail, { cause: error });
  const status = fastifyError.statusCode ?? 500;
  if (error instanceof SyntaxError || (status >= 400 && status < 500)) {
    if (status === 413) return new GatewayError('payload_too_large', 'The request body is too large', { cause: error });
    if (status === 415) return new GatewayError('unsupported_media_type', 'Unsupported Content-Type', { cause: error });
    return new GatewayError('bad_request', 'The request could not be read', { cause: error });
  }
  return new GatewayError('internal_error', 'Internal error', { cause: error });
}

export function sendProblem(reply: FastifyReply, error: GatewayError, request: FastifyRequest): FastifyReply {
  const problem = problemFor(error, request.id);
  return reply.code(problem.status).headers(problem.headers).send(problem.body);
}

export function errorHandler(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const gatewayError = toGatewayError(error);
  logAnswer(request.log, gatewayError, error, request.raw, {}, { endpoint: request.routeOptions.url });
  return sendProblem(reply, gatewayError, request);
}

/**
 * One line per answered error: a failure (5xx) with its cause; a refusal with its code and
 * what tells the request apart (method, path without the query, route, credential kind, key).
 */
function logAnswer(log: FastifyBaseLogger, gatewayError: GatewayError, error: unknown, request: IncomingMessage, fields: { reqId?: string }, subject: RefusalSubject): void {
  if (gatewayError.status >= 500) log.error({ ...fields, err: error }, 'request failed');
  else log.info({ ...fields, code: gatewayError.code, status: gatewayError.status, ...refusalFields(request, subject) }, 'request refused');
}

/**
 * `errorHandler` for a bare `ServerResponse`, for a request fastify's error handler never sees
 * (the door's refusals and failures, the MCP handler's credential refusals): the same problem+json,
 * headers and log line, `reqId` added as fastify's request logger adds it. The line is logged even
 * when the client has left, so a failure is never lost. `subject`: the route that decided a
 * refusal and the key it proved, for its line.
 */
export function sendError(response: ServerResponse, error: unknown, requestId: string, log: FastifyBaseLogger, subject: RefusalSubject = {}): void {
  const gatewayError = toGatewayError(error as Error);
  logAnswer(log, gatewayError, error, response.req, { reqId: requestId }, subject);
  if (response.destroyed) return;
  // An answer already under way cannot be followed by another: the connection just ends.
  if (response.headersSent) {
    response.destroy();
    return;
  }
  writeProblem(response, gatewayError, requestId);
}

function writeProblem(response: ServerResponse, error: GatewayError, requestId: string): void {
  const problem = problemFor(error, requestId);
  const body = JSON.stringify(problem.body);
  response.writeHead(problem.status, { 'x-request-id': requestId, ...problem.headers, 'content-length': Buffer.byteLength(body) });
  response.end(body);
}
