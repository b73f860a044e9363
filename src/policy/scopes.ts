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

interface AllowedToolsEntry {
  readonly features: ReadonlySet<string>;
  readonly tools: ReadonlySet<string>;
}

const NO_TOOLS: ReadonlySet<string> = new Set();

/**
 * The tools a key may call (scope held after alias expansion, licensed feature on), for
 * filtering `tools/list` answers. Built once per gateway (`build()`) over its tables; memoised
 * by the identity of the granted array (the verifier's cached key state shares one frozen
 * array between keys with the same grant), so repeated calls for one key cost a lookup.
 * Results are shared: do not mutate them.
 */
export class ToolGrants {
  readonly #tables: Tables;
  readonly #effective = new WeakMap<readonly string[], ReadonlySet<string>>();
  readonly #allowed = new WeakMap<readonly string[], AllowedToolsEntry>();

  constructor(tables: Tables) {
    this.#tables = tables;
  }

  /** The granted scopes plus what their aliases stand for. */
  effectiveScopes(granted: readonly string[]): ReadonlySet<string> {
    let effective = this.#effective.get(granted);
    if (effective === undefined) {
      const set = new Set<string>();
      for (const held of granted) {
        set.add(held);
        for (const member of this.#tables.mcp.aliases.get(held) ?? []) set.add(member);
      }
      effective = set;
      this.#effective.set(granted, effective);
    }
    return effective;
  }

  /** The tools this principal may call; admins call none. */
  allowedTools(principal: Principal, licence: { readonly features: ReadonlySet<string> }): ReadonlySet<string> {
    if (principal.kind !== 'api_key') return NO_TOOLS;
    const cached = this.#allowed.get(principal.scopes);
    if (cached !== undefined && cached.features === licence.features) return cached.tools;
    const tools = new Set<string>();
    for (const scope of this.effectiveScopes(principal.scopes)) {
      const entry = this.#tables.mcp.scopes.get(scope);
      if (entry === undefined || (entry.feature !== undefined && !licence.features.has(entry.feature))) continue;
      for (const tool of entry.tools) tools.add(tool);
    }
    this.#allowed.set(principal.scopes, { features: licence.features, tools });
    return tools;
  }
}
