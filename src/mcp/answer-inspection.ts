import { GatewayError } from '../http/errors.ts';
import { parseStrictJson } from './json-rpc-body.ts';
import { filterToolsList, toolsListShape } from './tools-list-filter.ts';

/**
 * A JSON answer of the upstream on an MCP path (a whole body, or the data of one event),
 * checked before the client may read it (interface.md, "Holding under abuse": odd upstream
 * answers). It must parse as strictly as posted bodies do (`parseStrictJson`: RFC 8259, no
 * byte-order mark, no duplicate member names at any depth, no `NaN`); a tools list in it must
 * answer a `tools/list` request; what passes is filtered and re-serialised, so the client
 * reads exactly the value the gateway checked, whatever its own parser tolerates.
 */
export type AnswerInspection = { readonly ok: true; readonly serialized: string } | { readonly ok: false; readonly reason: string };

export interface AnswerRules {
  /** The tools the key may call. */
  readonly allowed: ReadonlySet<string>;
  /**
   * The ids of the `tools/list` requests the answer may respond to. Undefined when they are
   * not known (an event stream opened by a GET): then every tools list is filtered by shape.
   */
  readonly toolsListIds: ReadonlySet<unknown> | undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The ids of the `tools/list` requests among posted messages. */
export function toolsListIdsOf(messages: readonly unknown[]): ReadonlySet<unknown> {
  const ids = new Set<unknown>();
  for (const message of messages) {
    const { method, id } = message as { method?: unknown; id?: unknown };
    if (method === 'tools/list' && (typeof id === 'string' || typeof id === 'number')) ids.add(id);
  }
  return ids;
}

/** A body as received: UTF-8 only (a byte-order mark is kept, so the parser refuses it). */
export function inspectAnswerBytes(bytes: Uint8Array, rules: AnswerRules): AnswerInspection {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return refused('the answer is not UTF-8');
  }
  return inspectAnswerText(text, rules);
}

export function inspectAnswerText(text: string, rules: AnswerRules): AnswerInspection {
  let value: unknown;
  try {
    value = parseStrictJson(text);
  } catch (error) {
    return refused(error instanceof GatewayError ? `the answer is not strict JSON (${error.message})` : 'the answer is not strict JSON');
  }
  if (Array.isArray(value)) {
    for (const message of value) {
      const problem = problemOf(message, rules);
      if (problem !== undefined) return refused(problem);
    }
  } else {
    const problem = problemOf(value, rules);
    if (problem !== undefined) return refused(problem);
  }
  return { ok: true, serialized: JSON.stringify(filterToolsList(value, rules.allowed)) };
}

/** Why a message cannot be passed on, or undefined. */
function problemOf(message: unknown, rules: AnswerRules): string | undefined {
  // A batch answer holds messages, never batches: no reader agrees on what a nested one means.
  if (Array.isArray(message)) return 'a batch nested in a batch';
  const shape = toolsListShape(message);
  if (shape === 'ambiguous') return 'a result or tools member spelled in another case';
  if (shape === 'list' && rules.toolsListIds !== undefined && !rules.toolsListIds.has((message as { id?: unknown }).id)) {
    return 'a tools list answering a request that is not tools/list';
  }
  return undefined;
}

function refused(reason: string): AnswerInspection {
  return { ok: false, reason };
}
