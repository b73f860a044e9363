/**
 * The request headers the MCP rules read (docs/mcp.md, "Protocol revisions"), as data: every
 * value each one was sent with, so that a duplicate is seen rather than merged.
 */
export interface McpHeaders {
  readonly origin: readonly string[];
  readonly protocolVersion: readonly string[];
  /** `Mcp-Method` (2026-07-28): mirrors the message's `method`. */
  readonly method: readonly string[];
  /** `Mcp-Name` (2026-07-28): mirrors `params.name` (or `params.uri` of `resources/read`). */
  readonly name: readonly string[];
  /** `Mcp-Param-{Name}` (2026-07-28), by lower-cased `{Name}`: mirrors a tool argument its schema marks with `x-mcp-header`. */
  readonly params: ReadonlyMap<string, readonly string[]>;
}

/** A tool argument that its `inputSchema` marks to be mirrored into `Mcp-Param-{name}`. */
export interface ParamHeader {
  /** `{Name}`, lower-cased: header names compare without case. */
  readonly name: string;
  /** The chain of `properties` keys that leads to the argument. */
  readonly path: readonly string[];
}

/**
 * The `x-mcp-header` annotations of each tool, as the tool server listed them: undefined for a
 * tool whose schema is not known, `invalid` for one whose annotations break the revision's rules.
 */
export interface ToolHeaderLookup {
  paramHeadersOf(tool: string): readonly ParamHeader[] | 'invalid' | undefined;
}

export const NO_MCP_HEADERS: McpHeaders = Object.freeze({ origin: [], protocolVersion: [], method: [], name: [], params: new Map() });

const SENTINEL_PREFIX = '=?base64?';
const SENTINEL_SUFFIX = '?=';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * A mirror header's value as the client meant it: a value in the Base64 sentinel
 * (`=?base64?…?=`, the revision's "Value Encoding") decoded from UTF-8, any other as sent.
 * Undefined when the sentinel holds no valid Base64 of valid UTF-8.
 */
export function decodeMirrorValue(value: string): string | undefined {
  if (!value.startsWith(SENTINEL_PREFIX) || !value.endsWith(SENTINEL_SUFFIX) || value.length < SENTINEL_PREFIX.length + SENTINEL_SUFFIX.length) return value;
  const encoded = value.slice(SENTINEL_PREFIX.length, value.length - SENTINEL_SUFFIX.length);
  if (!BASE64.test(encoded)) return undefined;
  try {
    return utf8.decode(Buffer.from(encoded, 'base64'));
  } catch {
    return undefined;
  }
}
