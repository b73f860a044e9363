import { pipeline as pipe } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import type { UpstreamResponse } from '../proxy/upstream.ts';
import { toolsListIdsOf } from './answer-inspection.ts';
import type { Exchange } from './mcp-exchange.ts';
import type { StreamBinding } from './session-gate.ts';
import { createSseFilter } from './sse-filter.ts';
import type { ToolsSeen } from './tools-list-filter.ts';

export interface EventStreamRelay {
  /** The tools the key may call. */
  readonly allowed: ReadonlySet<string>;
  /** The stream's session, kept bound while it is open (and, on the legacy transport, bound by its endpoint event); made once the stream is piped, so nothing is left running if it never is. */
  readonly bind: () => StreamBinding;
  readonly log: FastifyBaseLogger;
  /** Told of the tools each list passes on. */
  readonly seen: ToolsSeen;
}

/**
 * Pipes an upstream event stream, whose head the client already has, through the SSE filter
 * to the client: every event checked as it comes, tools lists filtered to the key's tools.
 */
export function streamEvents(exchange: Exchange, answer: UpstreamResponse, { allowed, bind, log, seen }: EventStreamRelay): void {
  let dropped = 0;
  const filter = createSseFilter({
    allowed,
    seen,
    // A POST's stream answers the posted requests only; a GET's may carry answers to any (a resumed stream, the legacy transport).
    toolsListIds: exchange.body === undefined ? undefined : toolsListIdsOf(exchange.body.messages),
    // The first drop is logged with its reason; the rest are counted and logged once when the
    // stream ends, so an upstream sending bad events cannot flood the log.
    onDropped: (reason) => {
      if (dropped++ === 0) log.warn({ reqId: exchange.requestId, reason }, 'An event of the upstream was not passed on');
    },
    // Called only once events flow, after `binding` below is made.
    ...(exchange.transport === 'sse' ? { onEndpoint: (data: string) => binding.bindEndpoint(data) } : {}),
  });
  // The client sees the headers at once, before the first event.
  exchange.response.flushHeaders();
  const binding = bind();
  pipe(answer.body, filter, exchange.response, () => {
    if (dropped > 1) log.warn({ reqId: exchange.requestId, dropped }, 'Events of the upstream were not passed on');
    binding.end();
  });
}
