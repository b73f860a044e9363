/**
 * The MCP protocol revisions the gateway speaks (docs/mcp.md, "Protocol revisions"). The
 * methods a client needs to connect are the tool table's (`CONNECTION_METHODS`, config/mcp-table.ts).
 */

/** Every published revision, oldest first: 2024-11-05 is the legacy HTTP+SSE transport, 2026-07-28 the stateless one. */
export const MCP_REVISIONS: readonly string[] = Object.freeze(['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28']);

/**
 * The first stateless revision: no `initialize`, `server/discover` instead, and the request
 * metadata headers (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) mirrored from the body.
 */
export const STATELESS_REVISION = '2026-07-28';

/** The stateless revisions (selected by `MCP-Protocol-Version` alone, advertised by `server/discover`). */
export const STATELESS_REVISIONS: readonly string[] = Object.freeze(MCP_REVISIONS.filter((revision) => revision >= STATELESS_REVISION));
