import type { LicensedFeature } from './env.ts';
import type { RateRule } from './rate-limit.ts';
import { fieldOf, type Checked, type Problem } from './table-file.ts';
import { MCP_PREFIX, SCOPE, type McpFile } from './table-schemas.ts';

/** The MCP tool table (`config/mcp-tools.yaml`) compiled: scopes, their tools, aliases and method rules. */

/** What a JSON-RPC method (or a client-sent response) needs: any MCP scope, nothing (refused), or one scope. */
export type MethodRule = 'any_mcp' | 'deny' | { readonly scope: string };

export interface McpScope {
  readonly name: string;
  readonly feature: LicensedFeature | undefined;
  readonly tools: readonly string[];
}

export interface McpTool {
  readonly name: string;
  readonly scope: string;
  readonly feature: LicensedFeature | undefined;
}

export interface McpTable {
  /** MCP scope → its tools and licensed feature, in file order. */
  readonly scopes: ReadonlyMap<string, McpScope>;
  /** Tool → the one scope that grants it. */
  readonly tools: ReadonlyMap<string, McpTool>;
  /** Alias → the scopes it stands for. */
  readonly aliases: ReadonlyMap<string, readonly string[]>;
  /** Exact JSON-RPC method names. */
  readonly methods: ReadonlyMap<string, MethodRule>;
  /** `prefix/*` entries, longest prefix first; `prefix` keeps its trailing `/`. */
  readonly methodPrefixes: readonly { readonly prefix: string; readonly rule: MethodRule }[];
  /** Messages without `method` (responses to server requests). */
  readonly responses: MethodRule;
  /** Tool → its rate limit, counted per key and tool (`limits:`). */
  readonly limits: ReadonlyMap<string, RateRule>;
}

/**
 * Methods without which a client of some revision cannot connect: the handshake and its
 * notification (2024-11-05 … 2025-11-25), `ping`, and `server/discover` (2026-07-28, which a
 * client in `auto` mode sends first to learn the revision). Every table opens them to any
 * `mcp:` scope (docs/mcp.md, "Protocol revisions"), so that a key reaches the refusal that
 * explains itself instead of failing to connect; a table may list them only as `any_mcp`.
 */
export const CONNECTION_METHODS: readonly string[] = Object.freeze(['initialize', 'notifications/initialized', 'ping', 'server/discover']);

const RPC_METHOD = /^[A-Za-z0-9_$.-]+(?:\/[A-Za-z0-9_$.-]+)*(?:\/\*)?$/;

type Scopes = ReadonlyMap<string, McpScope>;
type Aliases = ReadonlyMap<string, readonly string[]>;
type MethodPrefix = { prefix: string; rule: MethodRule };

export function buildMcpTable(file: McpFile): Checked<McpTable> {
  const problems: Problem[] = [];
  const { scopes, tools } = compileScopes(file.scopes, problems);
  const aliases = compileAliases(file.aliases, scopes, problems);
  const { methods, methodPrefixes } = compileMethods(file.methods, scopes, aliases, problems);

  const responses = methodRule(file.responses, scopes, aliases);
  if ('problem' in responses) problems.push({ field: 'responses', message: responses.problem });
  const limits = compileLimits(file.limits, tools, problems);

  if (problems.length > 0 || 'problem' in responses) return { ok: false, problems };
  return {
    ok: true,
    value: Object.freeze({
      scopes,
      tools,
      aliases,
      methods,
      methodPrefixes: Object.freeze(methodPrefixes.map((entry) => Object.freeze(entry))),
      responses: responses.rule,
      limits,
    }),
  };
}

/** Each tool's rate limit; a limit for a tool the table does not list is a mistake, not a no-op. */
function compileLimits(entries: McpFile['limits'], tools: ReadonlyMap<string, McpTool>, problems: Problem[]): Map<string, RateRule> {
  const limits = new Map<string, RateRule>();
  for (const [tool, limit] of Object.entries(entries)) {
    if (!tools.has(tool)) {
      problems.push({ field: fieldOf(['limits', tool]), message: `"${tool}" is not a tool of this table (list it under a scope first)` });
      continue;
    }
    limits.set(tool, Object.freeze({ requests: limit.requests, perSeconds: limit.per_seconds }));
  }
  return limits;
}

/** Each MCP scope with its tools; a tool belongs to one scope only. */
function compileScopes(entries: McpFile['scopes'], problems: Problem[]): { scopes: Map<string, McpScope>; tools: Map<string, McpTool> } {
  const scopes = new Map<string, McpScope>();
  const tools = new Map<string, McpTool>();
  for (const [name, entry] of Object.entries(entries)) {
    const field = fieldOf(['scopes', name]);
    if (!SCOPE.test(name) || !name.startsWith(MCP_PREFIX)) {
      problems.push({ field, message: 'an MCP scope must look like mcp:name (lower case)' });
      continue;
    }
    entry.tools.forEach((tool, index) => {
      const owner = tools.get(tool);
      if (owner) {
        problems.push({
          field: `${field}.tools[${index}]`,
          message: `tool "${tool}" is already listed under ${fieldOf(['scopes', owner.scope])}`,
        });
      } else {
        tools.set(tool, Object.freeze({ name: tool, scope: name, feature: entry.feature }));
      }
    });
    scopes.set(name, Object.freeze({ name, feature: entry.feature, tools: Object.freeze([...entry.tools]) }));
  }
  if (scopes.size === 0) problems.push({ field: 'scopes', message: 'must declare at least one MCP scope' });
  return { scopes, tools };
}

/** Each alias with the MCP scopes it stands for; aliases do not nest. */
function compileAliases(entries: McpFile['aliases'], scopes: Scopes, problems: Problem[]): Map<string, readonly string[]> {
  const aliases = new Map<string, readonly string[]>();
  for (const [name, members] of Object.entries(entries)) {
    const field = fieldOf(['aliases', name]);
    if (!SCOPE.test(name) || !name.startsWith(MCP_PREFIX)) {
      problems.push({ field, message: 'an alias must look like mcp:name (lower case)' });
      continue;
    }
    if (scopes.has(name)) {
      problems.push({ field, message: `"${name}" is already an MCP scope` });
      continue;
    }
    members.forEach((member, index) => {
      if (!scopes.has(member)) {
        const what = member in entries ? 'an alias (aliases do not nest)' : 'not an MCP scope of this file';
        problems.push({ field: `${field}[${index}]`, message: `"${member}" is ${what}` });
      } else if (members.indexOf(member) !== index) {
        problems.push({ field: `${field}[${index}]`, message: `"${member}" is listed twice` });
      }
    });
    aliases.set(name, Object.freeze([...new Set(members)]));
  }
  return aliases;
}

/** The rule of each JSON-RPC method name, and of each `prefix/*` (longest prefix first). */
function compileMethods(
  entries: McpFile['methods'],
  scopes: Scopes,
  aliases: Aliases,
  problems: Problem[],
): { methods: Map<string, MethodRule>; methodPrefixes: MethodPrefix[] } {
  const methods = new Map<string, MethodRule>();
  const methodPrefixes: MethodPrefix[] = [];
  for (const [name, value] of Object.entries(entries)) {
    const field = fieldOf(['methods', name]);
    if (!RPC_METHOD.test(name)) {
      problems.push({ field, message: 'must be a JSON-RPC method name, optionally ending in /*' });
      continue;
    }
    if (name === 'tools/call' || name === 'tools/*') {
      problems.push({ field, message: 'tools/call is governed by the scopes table, not by methods' });
      continue;
    }
    const parsed = methodRule(value, scopes, aliases);
    if ('problem' in parsed) {
      problems.push({ field, message: parsed.problem });
      continue;
    }
    if (CONNECTION_METHODS.includes(name) && parsed.rule !== 'any_mcp') {
      problems.push({ field, message: `${name} is needed to connect: it is always any_mcp` });
      continue;
    }
    if (name.endsWith('/*')) methodPrefixes.push({ prefix: name.slice(0, -1), rule: parsed.rule });
    else methods.set(name, parsed.rule);
  }
  for (const name of CONNECTION_METHODS) if (!methods.has(name)) methods.set(name, 'any_mcp');
  methodPrefixes.sort((a, b) => b.prefix.length - a.prefix.length);
  return { methods, methodPrefixes };
}

function methodRule(value: string, scopes: Scopes, aliases: Aliases): { rule: MethodRule } | { problem: string } {
  if (value === 'any_mcp' || value === 'deny') return { rule: value };
  if (scopes.has(value)) return { rule: Object.freeze({ scope: value }) };
  if (aliases.has(value)) return { problem: `"${value}" is an alias: name one MCP scope` };
  return { problem: `must be any_mcp, deny or an MCP scope of this file (got "${value}")` };
}
