import type { IncomingMessage } from 'node:http';
import { NO_MCP_HEADERS, type McpHeaders } from '../policy/mcp-headers.ts';

const PARAM_PREFIX = 'mcp-param-';

/**
 * The headers the MCP rules read, from the request's raw headers: Node joins a repeated
 * unknown header into one value (`a, b`), which would hide a duplicate `Mcp-Name` behind a
 * value no rule could take apart. One pass; most requests carry none of them. A name spelled
 * with `_` for `-` counts as the same header (a duplicate, or a value to check).
 */
export function mcpHeadersOf(request: IncomingMessage): McpHeaders {
  const raw = request.rawHeaders;
  let found: { origin: string[]; protocolVersion: string[]; method: string[]; name: string[]; params: Map<string, string[]> } | undefined;
  for (let index = 0; index < raw.length; index += 2) {
    const first = raw[index]!.charCodeAt(0) | 0x20;
    // Only `Origin` and `Mcp-…` matter: skip the rest without lower-casing them.
    if (first !== 0x6f && first !== 0x6d) continue;
    // Many stacks behind a proxy (CGI-style environments: WSGI, Rack, PHP) read `Mcp_Name` as `Mcp-Name`: so does this.
    const name = raw[index]!.toLowerCase().replaceAll('_', '-');
    const value = raw[index + 1]!;
    found ??= { origin: [], protocolVersion: [], method: [], name: [], params: new Map() };
    if (name === 'origin') found.origin.push(value);
    else if (name === 'mcp-protocol-version') found.protocolVersion.push(value);
    else if (name === 'mcp-method') found.method.push(value);
    else if (name === 'mcp-name') found.name.push(value);
    else if (name.startsWith(PARAM_PREFIX) && name.length > PARAM_PREFIX.length) {
      const param = name.slice(PARAM_PREFIX.length);
      const values = found.params.get(param);
      if (values === undefined) found.params.set(param, [value]);
      else values.push(value);
    }
  }
  return found ?? NO_MCP_HEADERS;
}
