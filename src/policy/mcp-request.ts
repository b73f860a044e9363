import { decodeMirrorValue, type McpHeaders, type ParamHeader, type ToolHeaderLookup } from './mcp-headers.ts';
import { MCP_REVISIONS } from './mcp-revisions.ts';
import { ALLOW, deny, type Allow, type Deny } from './denial.ts';

/**
 * The rules an MCP request's headers must meet (docs/mcp.md, "Protocol revisions"), as
 * `decide()` asks them: pure, on data read from the request. The revision's own text is the
 * source: Streamable HTTP, "Security" (Origin), "Protocol Version Header" and "Request
 * Metadata" (https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http).
 */
export interface McpRequestFacts {
  readonly headers: McpHeaders;
  /** `MCP_ALLOWED_ORIGINS`, each a serialised origin (`https://app.example`). */
  readonly allowedOrigins: ReadonlySet<string>;
  readonly toolHeaders: ToolHeaderLookup;
  /**
   * True once the request is an exchange the key may have (the credential and route allowed):
   * then its protocol version is decided, and with the messages the headers that mirror them.
   */
  readonly exchange: boolean;
  /** The body is a JSON-RPC batch (2025-03-26): no single message for headers to mirror. */
  readonly batch?: boolean;
}

const META_VERSION = 'io.modelcontextprotocol/protocolVersion';

/**
 * A browser page on another origin (DNS rebinding) must not reach the tool server: the
 * revision makes its server refuse such an `Origin`, which a server behind the gateway cannot
 * see for what it was. No `Origin` (every non-browser client) passes.
 */
export function decideOrigin({ origin }: McpHeaders, allowed: ReadonlySet<string>): Allow | Deny {
  if (origin.length === 0) return ALLOW;
  if (origin.length === 1 && allowed.has(origin[0]!.toLowerCase())) return ALLOW;
  const named = origin.length === 1 ? `The origin ${clip(origin[0]!)} is` : 'A request with two Origin headers is';
  return deny('origin_not_allowed', `${named} not allowed on MCP paths (MCP_ALLOWED_ORIGINS)`);
}

/** `MCP-Protocol-Version`: absent (revisions before 2025-06-18 send none), or exactly one revision the gateway speaks. */
export function decideProtocolVersion({ protocolVersion }: McpHeaders): Allow | Deny {
  if (protocolVersion.length === 0) return ALLOW;
  if (protocolVersion.length > 1) return unsupported('MCP-Protocol-Version was sent more than once', protocolVersion.join(', '));
  const version = protocolVersion[0]!;
  if (MCP_REVISIONS.includes(version)) return ALLOW;
  return unsupported(`MCP-Protocol-Version ${clip(version)} is not a revision the gateway speaks (${MCP_REVISIONS.join(', ')})`, version);
}

/** The first revision without JSON-RPC batches (2025-03-26 added them, 2025-06-18 removed them). */
export const FIRST_REVISION_WITHOUT_BATCHES = '2025-06-18';

/**
 * A JSON-RPC batch is a message of 2025-03-26 only: a client of a later revision never sends
 * one, and its server need not read one, so one is refused here rather than forwarded to a
 * server that may take it for something else (basic/transports of 2025-06-18, "Sending Messages
 * to the Server": the body is one message; https://modelcontextprotocol.io/specification/2025-06-18/changelog). No `MCP-Protocol-Version` is a client of
 * 2025-03-26 or earlier, whose batches pass. Asked after `decideProtocolVersion`.
 */
export function decideBatch({ headers, batch }: McpRequestFacts): Allow | Deny {
  if (batch !== true || headers.protocolVersion.length !== 1) return ALLOW;
  const version = headers.protocolVersion[0]!;
  if (version < FIRST_REVISION_WITHOUT_BATCHES) return ALLOW;
  return deny('validation_failed', `MCP-Protocol-Version ${clip(version)} has no JSON-RPC batches: send each message in a request of its own`);
}

/**
 * The headers that mirror the body (2026-07-28) must say what the body says, so that whatever
 * behind the gateway routes, meters or audits on them sees the message that was decided. A
 * header that is absent is the tool server's to require; one that is present and disagrees,
 * is sent twice, or cannot be checked is refused here.
 */
export function decideMirrors(facts: McpRequestFacts, messages: readonly unknown[] | undefined): Allow | Deny {
  const { headers } = facts;
  const mirrored = headers.method.length > 0 || headers.name.length > 0 || headers.params.size > 0;
  if (mirrored && !allPrintable(headers)) return mismatch('An Mcp-* header value holds a character outside printable ASCII: use the =?base64?…?= form');
  if (messages === undefined) return mirrored ? mismatch('Mcp-Method, Mcp-Name and Mcp-Param-* mirror a message: a request without one carries none') : ALLOW;
  if (facts.batch === true || messages.length !== 1) {
    return mirrored ? mismatch('Mcp-Method, Mcp-Name and Mcp-Param-* mirror a single message, not a batch') : ALLOW;
  }
  const message = messages[0];
  if (!isObject(message)) return mirrored ? mismatch('The body is not a JSON-RPC message for the Mcp-* headers to mirror') : ALLOW;
  const params = isObject(message.params) ? message.params : undefined;
  const version = versionMismatch(headers, params);
  if (version !== undefined) return version;
  if (!mirrored) return ALLOW;
  return methodMismatch(headers, message.method) ?? nameMismatch(headers, message.method, params) ?? paramMismatch(facts, message.method, params) ?? ALLOW;
}

/** The body's own protocol version (`_meta`, 2026-07-28) must be the header's. */
/** Field values of visible ASCII, space and tab only (RFC 9110): Node would pass other bytes on as Latin-1, which a reader of UTF-8 reads as something else. */
function allPrintable(headers: McpHeaders): boolean {
  const printable = (value: string) => PRINTABLE.test(value);
  if (!headers.method.every(printable) || !headers.name.every(printable)) return false;
  for (const values of headers.params.values()) if (!values.every(printable)) return false;
  return true;
}

const PRINTABLE = /^[\t\x20-\x7e]*$/;

function versionMismatch(headers: McpHeaders, params: Record<string, unknown> | undefined): Deny | undefined {
  const meta = params !== undefined && isObject(params._meta) ? params._meta[META_VERSION] : undefined;
  if (meta === undefined || headers.protocolVersion.length !== 1 || meta === headers.protocolVersion[0]) return undefined;
  return mismatch(`MCP-Protocol-Version says ${clip(headers.protocolVersion[0]!)}, the body's _meta says ${clip(String(meta))}`);
}

function methodMismatch({ method: sent }: McpHeaders, method: unknown): Deny | undefined {
  if (sent.length === 0) return undefined;
  if (sent.length > 1) return mismatch('Mcp-Method was sent more than once');
  if (sent[0] === method) return undefined;
  return mismatch(`Mcp-Method says ${clip(sent[0]!)}, the body's method is ${typeof method === 'string' ? clip(method) : 'missing'}`);
}

/** `Mcp-Name` mirrors `params.uri` for `resources/read`, `params.name` otherwise (`tools/call`, `prompts/get`). */
function nameMismatch({ name: sent }: McpHeaders, method: unknown, params: Record<string, unknown> | undefined): Deny | undefined {
  if (sent.length === 0) return undefined;
  if (sent.length > 1) return mismatch('Mcp-Name was sent more than once');
  const decoded = decodeMirrorValue(sent[0]!);
  if (decoded === undefined) return mismatch('Mcp-Name holds no valid Base64 of UTF-8 in its =?base64?…?= form');
  const target = params === undefined ? undefined : method === 'resources/read' ? params.uri : params.name;
  if (decoded === target) return undefined;
  return mismatch(`Mcp-Name says ${clip(decoded)}, the body names ${typeof target === 'string' ? clip(target) : 'nothing'}`);
}

/**
 * Each `Mcp-Param-{Name}` must be an argument the tool's schema marks with `x-mcp-header`, and
 * carry its value. The schemas are the ones the tool server listed through the gateway; a tool
 * whose list the gateway has not seen cannot be checked, and the revision tells a client
 * refused with `-32020` to list the tools again and retry, which teaches the gateway.
 */
function paramMismatch(facts: McpRequestFacts, method: unknown, params: Record<string, unknown> | undefined): Deny | undefined {
  const sent = facts.headers.params;
  if (sent.size === 0) return undefined;
  if (method !== 'tools/call' || params === undefined || typeof params.name !== 'string') return mismatch('Mcp-Param-* headers mirror the arguments of a tools/call');
  const declared = facts.toolHeaders.paramHeadersOf(params.name);
  if (declared === 'invalid') return mismatch(`The schema of ${clip(params.name)} marks no argument the revision lets a client mirror (invalid x-mcp-header)`);
  if (declared === undefined) {
    return mismatch(`The gateway has not seen the schema of ${clip(params.name)} to check Mcp-Param-* against: list the tools (tools/list) and retry`);
  }
  const args = isObject(params.arguments) ? params.arguments : {};
  for (const [name, values] of sent) {
    const header = declared.find((candidate) => candidate.name === name);
    if (header === undefined) return mismatch(`Mcp-Param-${clip(name)} is not a parameter ${clip(params.name)} mirrors into a header`);
    if (values.length > 1) return mismatch(`Mcp-Param-${clip(name)} was sent more than once`);
    if (!agrees(values[0]!, valueAt(args, header))) return mismatch(`Mcp-Param-${clip(name)} does not match the argument it mirrors`);
  }
  return undefined;
}

function valueAt(args: Record<string, unknown>, header: ParamHeader): unknown {
  let value: unknown = args;
  for (const key of header.path) {
    if (!isObject(value) || !Object.hasOwn(value, key)) return undefined;
    value = value[key];
  }
  return value;
}

/**
 * A header value against its argument, as the revision's clients write it: strings as they
 * are, integers in decimal, booleans as `true`/`false`. Stricter than the revision's advice to
 * servers (compare integers by number, `42.0` is `42`): whatever behind the gateway keys on
 * the header's text must read the value that was decided, and the forwarded body carries
 * `42`. An integer outside the safe range is never equal: the body forwarded would not hold it.
 */
function agrees(sent: string, value: unknown): boolean {
  const decoded = decodeMirrorValue(sent);
  if (decoded === undefined) return false;
  if (typeof value === 'string') return decoded === value;
  if (typeof value === 'boolean') return decoded === String(value);
  if (typeof value === 'number') return Number.isSafeInteger(value) && decoded === String(value);
  // Absent or null arguments have no header; objects, arrays and fractions are never mirrored.
  return false;
}

function mismatch(detail: string): Deny {
  return deny('header_mismatch', detail);
}

function unsupported(detail: string, requested: string): Deny {
  return { ...deny('unsupported_protocol_version', detail), requested: clip(requested) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Client-supplied values go into `detail` bounded and printable. */
export function clip(text: string): string {
  const printable = text.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > 64 ? `${printable.slice(0, 64)}…` : printable;
}
