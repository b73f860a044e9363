import { GatewayError } from '../errors/gateway-error.ts';

/**
 * A JSON-RPC body posted to an MCP path, read strictly: the gateway decides on what it
 * parsed and the upstream receives exactly that, re-serialised
 * (docs/adr/0005-re-serialise-mcp-messages.md). Anything two JSON parsers could read differently is refused instead:
 * duplicate object keys at any depth (first-wins and last-wins parsers disagree on them),
 * bytes that are not UTF-8, a byte-order mark, a Content-Type or Content-Encoding the
 * upstream might decode in another way.
 */
export interface JsonRpcBody {
  /** One element per message: a single message is `[message]`, a batch its elements. */
  readonly messages: readonly unknown[];
  /** The body was an array (a JSON-RPC batch). */
  readonly batch: boolean;
  /** What the upstream receives: the parsed body, re-serialised. */
  readonly serialized: string;
}

/** Nesting deeper than this is refused: no MCP message needs it, and it bounds the work of every parser after us. */
export const MAX_JSON_DEPTH = 64;

/** `application/json`, optionally with `charset=utf-8` (the only charset JSON has, RFC 8259 §8.1); nothing else. */
const JSON_MEDIA_TYPE = /^application\/json[ \t]*(?:;[ \t]*charset[ \t]*=[ \t]*(?:utf-8|"utf-8")[ \t]*)?$/i;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The request headers that decide how a body is read, as received (`rawHeaders` keeps duplicates). */
export interface BodyHeaders {
  readonly rawHeaders: readonly string[];
}

/** Content-Type must be JSON and said once; any Content-Encoding other than `identity` is refused. */
export function assertJsonBodyHeaders({ rawHeaders }: BodyHeaders): void {
  let contentType: string | undefined;
  let contentTypes = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (name === 'content-type') {
      contentTypes++;
      contentType = rawHeaders[i + 1];
    } else if (name === 'content-encoding' && rawHeaders[i + 1]!.trim().toLowerCase() !== 'identity') {
      throw new GatewayError('unsupported_media_type', 'MCP messages are sent without Content-Encoding');
    }
  }
  if (contentTypes !== 1 || contentType === undefined || !JSON_MEDIA_TYPE.test(contentType.trim())) {
    throw new GatewayError('unsupported_media_type', 'MCP messages are sent as one Content-Type: application/json');
  }
}

export interface JsonRpcBodyLimits {
  /**
   * Messages one batch may hold (`MCP_MAX_BATCH`). More is refused as a whole, before any
   * message is looked at: one small error, rather than one answer per message.
   */
  readonly maxBatch?: number;
}

/**
 * Parses a posted body into JSON-RPC messages. Throws `bad_request` for anything that is
 * not strict JSON, `batch_too_large` for a batch over `maxBatch`, `validation_failed` for
 * JSON that is not a message or a non-empty batch of messages (each an object with
 * `"jsonrpc": "2.0"`).
 */
export function parseJsonRpcBody(body: Uint8Array | undefined, limits: JsonRpcBodyLimits = {}): JsonRpcBody {
  if (body === undefined || body.length === 0) throw new GatewayError('bad_request', 'The MCP request has no body');
  let text: string;
  try {
    text = utf8.decode(body);
  } catch (error) {
    throw new GatewayError('bad_request', 'The body is not UTF-8', { cause: error });
  }
  const parsed = parseStrictJson(text);
  const batch = Array.isArray(parsed);
  const messages: readonly unknown[] = batch ? parsed : [parsed];
  if (messages.length === 0) throw new GatewayError('validation_failed', 'An empty JSON-RPC batch');
  if (limits.maxBatch !== undefined && messages.length > limits.maxBatch) {
    throw new GatewayError('batch_too_large', `A JSON-RPC batch holds at most ${limits.maxBatch} messages (this one ${messages.length})`);
  }
  for (const message of messages) {
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      throw new GatewayError('validation_failed', 'A JSON-RPC message must be an object');
    }
    if ((message as Record<string, unknown>).jsonrpc !== '2.0') {
      throw new GatewayError('validation_failed', 'A JSON-RPC message must carry "jsonrpc": "2.0"');
    }
  }
  return { messages, batch, serialized: JSON.stringify(parsed) };
}

/**
 * `JSON.parse` (which refuses a leading byte-order mark), also refusing what it would
 * silently accept but another parser might read otherwise: duplicate keys (compared after
 * unescaping: `"a"` and `"\u0061"` are one key) and nesting deeper than MAX_JSON_DEPTH.
 */
export function parseStrictJson(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new GatewayError('bad_request', 'The body is not valid JSON', { cause: error });
  }
  const problem = scanKeys(text);
  if (problem !== undefined) throw new GatewayError('bad_request', problem);
  return value;
}

interface Frame {
  /** Keys seen in this object; null for an array. */
  readonly keys: Set<string> | null;
  expectKey: boolean;
}

const QUOTE = 34;
const BACKSLASH = 92;

/**
 * One pass over text that `JSON.parse` has accepted (so it is well-formed JSON), tracking
 * the keys of every open object. Returns what is wrong, or undefined.
 */
function scanKeys(text: string): string | undefined {
  const stack: Frame[] = [];
  let top: Frame | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      let end = i + 1;
      let escaped = false;
      for (;;) {
        const d = text.charCodeAt(end);
        if (d === QUOTE) break;
        if (d === BACKSLASH) {
          escaped = true;
          end += 2;
        } else end++;
      }
      if (top !== undefined && top.keys !== null && top.expectKey) {
        const key = escaped ? (JSON.parse(text.slice(i, end + 1)) as string) : text.slice(i + 1, end);
        if (top.keys.has(key)) return `The key "${printable(key)}" appears twice in one JSON object`;
        top.keys.add(key);
        top.expectKey = false;
      }
      i = end;
    } else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (stack.length >= MAX_JSON_DEPTH) return `JSON nested deeper than ${MAX_JSON_DEPTH} levels`;
      top = { keys: c === 123 ? new Set() : null, expectKey: c === 123 };
      stack.push(top);
    } else if (c === 125 /* } */ || c === 93 /* ] */) {
      stack.pop();
      top = stack.at(-1);
    } else if (c === 44 /* , */ && top !== undefined && top.keys !== null) {
      top.expectKey = true;
    }
  }
  return undefined;
}

function printable(text: string): string {
  const shown = text.replace(/[^\x20-\x7e]/g, '?');
  return shown.length > 64 ? `${shown.slice(0, 64)}…` : shown;
}
