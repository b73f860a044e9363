import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/** A client's `x-request-id` is kept when it is a plain token, so traces join up; anything else is replaced by a UUID. */
export function requestIdOf(request: IncomingMessage): string {
  const offered = request.headers['x-request-id'];
  return typeof offered === 'string' && REQUEST_ID.test(offered) ? offered : randomUUID();
}
