import type { IncomingMessage } from 'node:http';

/**
 * What the fast lane already did for a request it passes on to fastify: the request id it
 * chose, and why the request cannot be served (a failure that is not a refusal: the store
 * down, a bug, an upstream that failed before answering). Fastify's forwarding route answers
 * it instead of deciding again, so every decision is made and counted once. (The lane answers
 * the decision's own refusals itself, as fastify's error handler would: `sendError`.)
 */
export interface HandOver {
  requestId: string;
  error: Error;
}

const kHandOver = Symbol('gatehouse.handOver');

interface HandedOver extends IncomingMessage {
  [kHandOver]?: HandOver;
}

export function handOver(request: IncomingMessage, handOver: HandOver): void {
  (request as HandedOver)[kHandOver] = handOver;
}

/** The request id the fast lane gave a request it handed over. */
export function handedOverRequestId(request: IncomingMessage): string | undefined {
  return (request as HandedOver)[kHandOver]?.requestId;
}

/** The hand-over, once: a request re-routed after it was taken is decided afresh. */
export function takeHandOver(request: IncomingMessage): HandOver | undefined {
  const taken = (request as HandedOver)[kHandOver];
  if (taken !== undefined) (request as HandedOver)[kHandOver] = undefined;
  return taken;
}
