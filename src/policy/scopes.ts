import type { Tables } from '../config/tables.ts';
import type { Principal } from './principal.ts';

/**
 * Scope arithmetic over the tool table of `config/mcp-tools.yaml` (loaded into
 * `tables.mcp`: tool → {scope, feature}, alias → scopes). A key's scopes are kept as
 * granted; aliases (`mcp:tools`) are expanded here, never stored expanded.
 */

/** True when the granted scopes include `scope`, directly or through an alias. Allocation-free. */
export function holdsScope(granted: readonly string[], scope: string, tables: Tables): boolean {
  const { aliases } = tables.mcp;
  for (const held of granted) {
    if (held === scope) return true;
    const members = aliases.get(held);
    if (members !== undefined && members.includes(scope)) return true;
  }
  return false;
}

/** True when the granted scopes include at least one MCP scope (an alias counts). Allocation-free. */
export function holdsAnyMcpScope(granted: readonly string[], tables: Tables): boolean {
  const { scopes, aliases } = tables.mcp;
  for (const held of granted) {
    if (scopes.has(held) || aliases.has(held)) return true;
  }
  return false;
}

/** The MCP scopes any one of which opens an MCP route, space-separated (for `WWW-Authenticate`). */
export function mcpScopeList(tables: Tables): string {
  return [...tables.mcp.scopes.keys()].join(' ');
}

const effectiveCache = new WeakMap<Tables, WeakMap<readonly string[], ReadonlySet<string>>>();

/**
 * The granted scopes plus what their aliases stand for. Memoised by the identity of the
 * `granted` array (the verifier's cached key state keeps one array per key), so repeated
 * calls for one key cost a lookup. The result is shared: do not mutate it.
 */
export function effectiveScopes(granted: readonly string[], tables: Tables): ReadonlySet<string> {
  let perTables = effectiveCache.get(tables);
  if (perTables === undefined) {
    perTables = new WeakMap();
    effectiveCache.set(tables, perTables);
  }
  let effective = perTables.get(granted);
  if (effective === undefined) {
    const set = new Set<string>();
    for (const held of granted) {
      set.add(held);
      for (const member of tables.mcp.aliases.get(held) ?? []) set.add(member);
    }
    effective = set;
    perTables.set(granted, effective);
  }
  return effective;
}

interface AllowedToolsEntry {
  readonly tables: Tables;
  readonly features: ReadonlySet<string>;
  readonly tools: ReadonlySet<string>;
}

const allowedCache = new WeakMap<readonly string[], AllowedToolsEntry>();
const NO_TOOLS: ReadonlySet<string> = new Set();

/**
 * The tools this principal may call (scope held after alias expansion, licensed feature
 * on), for filtering `tools/list` responses. Admins call no tools. Memoised like
 * `effectiveScopes`; the result is shared: do not mutate it.
 */
export function allowedTools(
  principal: Principal,
  licence: { readonly features: ReadonlySet<string> },
  tables: Tables,
): ReadonlySet<string> {
  if (principal.kind !== 'api_key') return NO_TOOLS;
  const cached = allowedCache.get(principal.scopes);
  if (cached !== undefined && cached.tables === tables && cached.features === licence.features) return cached.tools;
  const tools = new Set<string>();
  for (const scope of effectiveScopes(principal.scopes, tables)) {
    const entry = tables.mcp.scopes.get(scope);
    if (entry === undefined || (entry.feature !== undefined && !licence.features.has(entry.feature))) continue;
    for (const tool of entry.tools) tools.add(tool);
  }
  allowedCache.set(principal.scopes, { tables, features: licence.features, tools });
  return tools;
}
