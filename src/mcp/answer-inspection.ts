import { GatewayError } from '../errors/gateway-error.ts';
import { parseStrictJson } from './json-rpc-body.ts';
import { filterToolsList, toolsListShape, type ToolsSeen } from './tools-list-filter.ts';

/**
 * A JSON answer of the upstream on an MCP path (a whole body, or the data of one event),
 * checked before the client may read it (docs/security.md, "Holding under abuse": odd upstream
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
  /** Told of the tools each list passes on. */
  readonly seen?: ToolsSeen | undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const NO_IDS: ReadonlySet<unknown> = new Set();

/** The ids of the `tools/list` requests among posted messages (one shared empty set when there are none: the common case). */
export function toolsListIdsOf(messages: readonly unknown[]): ReadonlySet<unknown> {
  let ids: Set<unknown> | undefined;
  for (const message of messages) {
    const { method, id } = message as { method?: unknown; id?: unknown };
    if (method === 'tools/list' && (typeof id === 'string' || typeof id === 'number')) (ids ??= new Set()).add(id);
  }
  return ids ?? NO_IDS;
}

/**
 * A body as received: UTF-8 only (a byte-order mark is kept, so the parser refuses it).
 * `serialized` is the text as received when no parser could read a tools list out of it.
 */
export function inspectAnswerBytes(bytes: Uint8Array, rules: AnswerRules): AnswerInspection {
  if (cannotHoldToolsList(bytes)) {
    // As strict as any other answer (plain ASCII reads the same as Latin-1 and as UTF-8), but
    // passed on as it came: with no tools list possible, there is nothing to filter. As a
    // string, so that Node writes it in one piece with the response head.
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
    try {
      parseStrictJson(text);
    } catch (error) {
      return refused(error instanceof GatewayError ? `the answer is not strict JSON (${error.message})` : 'the answer is not strict JSON');
    }
    return { ok: true, serialized: text };
  }
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
  return { ok: true, serialized: JSON.stringify(filterToolsList(value, rules.allowed, rules.seen)) };
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

const BACKSLASH = 0x5c;

/**
 * True when no JSON reader, however lenient or case-blind, could find a `tools` member in the
 * bytes: they are plain ASCII (no byte that decodes to a letter folding onto one of `tools`,
 * such as U+017F ſ), hold no `\u` escape (which could spell one), and nowhere spell `tools` in
 * any case. The common answer (a `tools/call` result) is then passed on as it came, with no
 * parse, filter or re-serialisation: nothing in it is the filter's business.
 */
export function cannotHoldToolsList(bytes: Uint8Array): boolean {
  const last = bytes.length - 1;
  for (let i = 0; i <= last; i++) {
    const byte = bytes[i]!;
    if (byte >= 0x80) return false;
    if (byte === BACKSLASH && i < last && (bytes[i + 1]! | 0x20) === 0x75) return false;
    if ((byte | 0x20) === 0x74 && i + 4 <= last && isTools(bytes, i)) return false;
  }
  return true;
}

/** `tools`, in any case, at `at`. */
function isTools(bytes: Uint8Array, at: number): boolean {
  return (bytes[at + 1]! | 0x20) === 0x6f && (bytes[at + 2]! | 0x20) === 0x6f && (bytes[at + 3]! | 0x20) === 0x6c && (bytes[at + 4]! | 0x20) === 0x73;
}
