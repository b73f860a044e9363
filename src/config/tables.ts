import { join } from 'node:path';
import { buildMcpTable, type McpTable } from './mcp-table.ts';
import { buildRoutes, type RouteTable, type TablePaths } from './route-table.ts';
import { check, parseFile, routesIn } from './table-file.ts';
import { mcpFileSchema, routesFileSchema } from './table-schemas.ts';

/**
 * The route table (`config/routes.yaml`) and the MCP tool table (`config/mcp-tools.yaml`):
 * read once at start, validated, and returned as frozen, typed data that the policy
 * compiles (docs/configuration.md, "The tables in config/").
 */

export type { McpScope, McpTable, McpTool, MethodRule } from './mcp-table.ts';
export type { Credential, McpTransport, RouteSpec, TablePaths } from './route-table.ts';
export { parsePattern, type PathSegment } from './route-pattern.ts';

export const ROUTES_FILE = 'routes.yaml';
export const MCP_TOOLS_FILE = 'mcp-tools.yaml';

export interface Tables extends RouteTable {
  readonly mcp: McpTable;
}

/** Every scope a key may be granted: route scopes, MCP scopes and aliases. */
export function knownScopes(tables: Tables): ReadonlySet<string> {
  return new Set([...tables.routeScopes, ...tables.mcp.scopes.keys(), ...tables.mcp.aliases.keys()]);
}

/**
 * Reads and validates `routes.yaml` and `mcp-tools.yaml` from `configDir`. Throws an Error
 * naming the file and the field (`config/routes.yaml: route "events": credential: …`).
 */
export function loadTables(configDir: string, paths: TablePaths): Tables {
  const mcpFile = join(configDir, MCP_TOOLS_FILE);
  const routesFile = join(configDir, ROUTES_FILE);
  const mcp = check(mcpFile, buildMcpTable(parseFile(mcpFile, mcpFileSchema)));
  const routes = check(routesFile, buildRoutes(parseFile(routesFile, routesFileSchema, routesIn), mcp, paths));
  return Object.freeze({ ...routes, mcp });
}
