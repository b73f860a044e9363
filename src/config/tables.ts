import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { LICENSED_FEATURES } from './env.ts';
import type { LicensedFeature } from './env.ts';

/**
 * The route table (`config/routes.yaml`) and the MCP tool table (`config/mcp-tools.yaml`):
 * read once at start, validated, and returned as frozen, typed data that the policy
 * compiles (docs/configuration.md, "The tables in config/").
 */

export const ROUTES_FILE = 'routes.yaml';
export const MCP_TOOLS_FILE = 'mcp-tools.yaml';

export type Credential = 'api_key' | 'admin' | 'none';
export type McpTransport = 'streamable' | 'sse' | 'messages';

export type PathSegment =
  | { readonly kind: 'literal'; readonly value: string }
  | { readonly kind: 'param'; readonly name: string };

export interface RouteSpec {
  readonly name: string;
  /** The pattern after placeholder substitution, e.g. `/api/v1/agents/{agent_id}/events`. */
  readonly path: string;
  readonly segments: readonly PathSegment[];
  /** Pattern ends in `/**`: zero or more further segments. */
  readonly rest: boolean;
  readonly methods: readonly string[] | '*';
  readonly credential: Credential;
  readonly scope: string | undefined;
  readonly agentParam: string | undefined;
  readonly mcp: McpTransport | undefined;
}

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
}

export interface Tables {
  /** Scopes declared in routes.yaml for routes (e.g. `events:write`). */
  readonly routeScopes: ReadonlySet<string>;
  /** In match order; routes whose placeholder variable is unset are already dropped. */
  readonly routes: readonly RouteSpec[];
  readonly mcp: McpTable;
}

export interface TablePaths {
  mcpPath: string;
  mcpSsePath?: string | undefined;
  mcpMessagesPath?: string | undefined;
}

/** Every scope a key may be granted: route scopes, MCP scopes and aliases. */
export function knownScopes(tables: Tables): ReadonlySet<string> {
  return new Set([...tables.routeScopes, ...tables.mcp.scopes.keys(), ...tables.mcp.aliases.keys()]);
}

/**
 * Reads and validates `routes.yaml` and `mcp-tools.yaml` from `configDir`. Throws an Error
 * naming the file and the field (`config/routes.yaml: routes[2].credential: …`).
 */
export function loadTables(configDir: string, paths: TablePaths): Tables {
  const mcpFile = join(configDir, MCP_TOOLS_FILE);
  const routesFile = join(configDir, ROUTES_FILE);
  const mcp = check(mcpFile, buildMcpTable(parseFile(mcpFile, mcpFileSchema)));
  const routes = check(routesFile, buildRoutes(parseFile(routesFile, routesFileSchema), mcp, paths));
  return Object.freeze({ ...routes, mcp });
}

// ---------------------------------------------------------------------------------------
// Shapes

const SCOPE = /^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$/;
const ROUTE_NAME = /^[a-z][a-z0-9_]*$/;
const METHOD = /^[A-Z]+$/;
/** MCP tool names (MCP spec: 1–128 of A-Z a-z 0-9 _ - .). */
const TOOL = /^[A-Za-z0-9_.-]{1,128}$/;
const RPC_METHOD = /^[A-Za-z0-9_$.-]+(?:\/[A-Za-z0-9_$.-]+)*(?:\/\*)?$/;
const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** pchar without percent-encoding and without `$ * { }`, which belong to the pattern syntax. */
const LITERAL = /^[A-Za-z0-9._~!&'()+,;=:@-]+$/;
/** What a placeholder variable may hold: a plain absolute path (env.ts checks the same). */
const PLAIN_PATH = /^\/[A-Za-z0-9._~!&'()+,;=:@/-]*$/;
const PLACEHOLDER = /\$\{([^}]*)\}/g;
const MCP_PREFIX = 'mcp:';

const methodList = z.union([z.literal('*'), z.array(z.string().regex(METHOD, 'must be an upper-case HTTP method')).min(1)], {
  error: 'must be "*" or a non-empty list of upper-case HTTP methods',
});

const routeSchema = z.strictObject({
  name: z.string().regex(ROUTE_NAME, 'must match [a-z][a-z0-9_]*'),
  path: z.string().min(1),
  methods: methodList,
  credential: z.enum(['api_key', 'admin', 'none']),
  scope: z.string().optional(),
  agent_param: z.string().optional(),
  mcp: z.enum(['streamable', 'sse', 'messages']).optional(),
});

const routesFileSchema = z.strictObject({
  scopes: z.array(z.string().regex(SCOPE, 'must look like area:action (lower case)')).default([]),
  routes: z.array(routeSchema).min(1, 'must list at least one route'),
});

const mcpFileSchema = z.strictObject({
  scopes: z.record(
    z.string(),
    z.strictObject({
      feature: z.enum(LICENSED_FEATURES).optional(),
      tools: z.array(z.string().regex(TOOL, 'must be 1-128 of A-Z a-z 0-9 _ - .')).min(1, 'must list at least one tool'),
    }),
  ),
  aliases: z.record(z.string(), z.array(z.string()).min(1, 'must name at least one scope')).default({}),
  methods: z.record(z.string(), z.string()).default({}),
  responses: z.string().default('deny'),
});

type RoutesFile = z.output<typeof routesFileSchema>;
type McpFile = z.output<typeof mcpFileSchema>;

// ---------------------------------------------------------------------------------------
// Reading

/** A problem found in a file: the field path as printed, and what is wrong. */
interface Problem {
  field: string;
  message: string;
}

type Checked<T> = { ok: true; value: T } | { ok: false; problems: Problem[] };

function parseFile<S extends z.ZodType>(file: string, schema: S): z.output<S> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`${file}: cannot read: ${(error as Error).message}`, { cause: error });
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (error) {
    throw new Error(`${file}: invalid YAML: ${(error as Error).message.split('\n')[0]}`, { cause: error });
  }
  const result = schema.safeParse(data ?? {});
  if (!result.success) {
    fail(
      file,
      result.error.issues.map((issue) =>
        issue.code === 'unrecognized_keys'
          ? { field: fieldOf([...issue.path, issue.keys[0] ?? '']), message: `unknown field (${issue.keys.join(', ')})` }
          : { field: fieldOf(issue.path), message: issue.message },
      ),
    );
  }
  return result.data;
}

function check<T>(file: string, checked: Checked<T>): T {
  if (!checked.ok) fail(file, checked.problems);
  return checked.value;
}

function fail(file: string, problems: readonly Problem[]): never {
  throw new Error(problems.map((p) => `${file}: ${p.field || '(top level)'}: ${p.message}`).join('; '));
}

/** `routes[2].credential`, `scopes["mcp:calls"].tools[0]`. */
function fieldOf(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) out += out ? `.${key}` : key;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// mcp-tools.yaml

function buildMcpTable(file: McpFile): Checked<McpTable> {
  const problems: Problem[] = [];
  const scopes = new Map<string, McpScope>();
  const tools = new Map<string, McpTool>();
  for (const [name, entry] of Object.entries(file.scopes)) {
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

  const aliases = new Map<string, readonly string[]>();
  for (const [name, members] of Object.entries(file.aliases)) {
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
        const what = member in file.aliases ? 'an alias (aliases do not nest)' : 'not an MCP scope of this file';
        problems.push({ field: `${field}[${index}]`, message: `"${member}" is ${what}` });
      } else if (members.indexOf(member) !== index) {
        problems.push({ field: `${field}[${index}]`, message: `"${member}" is listed twice` });
      }
    });
    aliases.set(name, Object.freeze([...new Set(members)]));
  }

  const methods = new Map<string, MethodRule>();
  const methodPrefixes: { prefix: string; rule: MethodRule }[] = [];
  for (const [name, value] of Object.entries(file.methods)) {
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
    if (name.endsWith('/*')) methodPrefixes.push({ prefix: name.slice(0, -1), rule: parsed.rule });
    else methods.set(name, parsed.rule);
  }
  methodPrefixes.sort((a, b) => b.prefix.length - a.prefix.length);

  const responses = methodRule(file.responses, scopes, aliases);
  if ('problem' in responses) problems.push({ field: 'responses', message: responses.problem });

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
    }),
  };
}

function methodRule(
  value: string,
  scopes: ReadonlyMap<string, McpScope>,
  aliases: ReadonlyMap<string, readonly string[]>,
): { rule: MethodRule } | { problem: string } {
  if (value === 'any_mcp' || value === 'deny') return { rule: value };
  if (scopes.has(value)) return { rule: Object.freeze({ scope: value }) };
  if (aliases.has(value)) return { problem: `"${value}" is an alias: name one MCP scope` };
  return { problem: `must be any_mcp, deny or an MCP scope of this file (got "${value}")` };
}

// ---------------------------------------------------------------------------------------
// routes.yaml

const PLACEHOLDERS = {
  MCP_PATH: 'mcpPath',
  MCP_SSE_PATH: 'mcpSsePath',
  MCP_MESSAGES_PATH: 'mcpMessagesPath',
} as const satisfies Record<string, keyof TablePaths>;

function buildRoutes(
  file: RoutesFile,
  mcp: McpTable,
  paths: TablePaths,
): Checked<Pick<Tables, 'routeScopes' | 'routes'>> {
  const problems: Problem[] = [];
  const routeScopes = new Set<string>();
  file.scopes.forEach((scope, index) => {
    if (scope.startsWith(MCP_PREFIX)) {
      problems.push({ field: `scopes[${index}]`, message: 'mcp: scopes are declared in mcp-tools.yaml' });
    } else if (routeScopes.has(scope)) {
      problems.push({ field: `scopes[${index}]`, message: `"${scope}" is listed twice` });
    }
    routeScopes.add(scope);
  });

  const routes: { spec: RouteSpec; index: number }[] = [];
  const names = new Map<string, number>();
  file.routes.forEach((raw, index) => {
    const at = (key: string) => `routes[${index}].${key}`;
    const before = problems.length;
    const earlier = names.get(raw.name);
    if (earlier !== undefined) problems.push({ field: at('name'), message: `"${raw.name}" is already the name of routes[${earlier}]` });
    else names.set(raw.name, index);

    if (raw.credential !== 'api_key') {
      for (const key of ['scope', 'agent_param', 'mcp'] as const) {
        if (raw[key] !== undefined) problems.push({ field: at(key), message: 'only applies to credential api_key' });
      }
    }
    if (raw.scope !== undefined) {
      if (mcp.aliases.has(raw.scope)) {
        problems.push({ field: at('scope'), message: `"${raw.scope}" is an alias: require one scope` });
      } else if (!routeScopes.has(raw.scope) && !mcp.scopes.has(raw.scope)) {
        problems.push({ field: at('scope'), message: `unknown scope "${raw.scope}" (declare it under scopes)` });
      }
    }
    if (Array.isArray(raw.methods) && new Set(raw.methods).size !== raw.methods.length) {
      problems.push({ field: at('methods'), message: 'lists a method twice' });
    }

    const substituted = substitute(raw.path, paths);
    if ('problem' in substituted) {
      problems.push({ field: at('path'), message: substituted.problem });
      return;
    }
    if (substituted.path === undefined) return; // its placeholder variable is unset: dropped
    const pattern = parsePattern(substituted.path);
    const shown = substituted.path === raw.path ? '' : ` (${raw.path} = "${substituted.path}")`;
    if ('problem' in pattern) {
      problems.push({ field: at('path'), message: pattern.problem + shown });
      return;
    }
    if (raw.agent_param !== undefined && !pattern.segments.some((s) => s.kind === 'param' && s.name === raw.agent_param)) {
      problems.push({ field: at('agent_param'), message: `"${raw.agent_param}" is not a {parameter} of the path` });
    }
    if (problems.length > before) return;
    const spec: RouteSpec = Object.freeze({
      name: raw.name,
      path: substituted.path,
      segments: pattern.segments,
      rest: pattern.rest,
      methods: raw.methods === '*' ? '*' : Object.freeze([...raw.methods]),
      credential: raw.credential,
      scope: raw.scope,
      agentParam: raw.agent_param,
      mcp: raw.mcp,
    });
    for (const problem of reachability(spec, index, routes)) problems.push({ ...problem, message: problem.message + shown });
    routes.push({ spec, index });
  });

  const sse = routes.find((r) => r.spec.mcp === 'sse');
  const messages = routes.find((r) => r.spec.mcp === 'messages');
  if (sse && !messages) {
    problems.push({ field: `routes[${sse.index}].mcp`, message: 'an sse route needs a messages route: set MCP_MESSAGES_PATH too' });
  } else if (messages && !sse) {
    problems.push({ field: `routes[${messages.index}].mcp`, message: 'a messages route needs an sse route: set MCP_SSE_PATH too' });
  }

  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, value: { routeScopes, routes: Object.freeze(routes.map((r) => r.spec)) } };
}

/** Replaces `${VAR}`; `path: undefined` when a variable is unset (the route is dropped). */
function substitute(path: string, paths: TablePaths): { path: string | undefined } | { problem: string } {
  let unset = false;
  let problem: string | undefined;
  const result = path.replace(PLACEHOLDER, (_match, variable: string) => {
    if (!Object.hasOwn(PLACEHOLDERS, variable)) {
      problem ??= `unknown placeholder \${${variable}} (known: ${Object.keys(PLACEHOLDERS).join(', ')})`;
      return '';
    }
    const value = paths[PLACEHOLDERS[variable as keyof typeof PLACEHOLDERS]];
    if (value === undefined || value === '') {
      unset = true;
      return '';
    }
    if (!PLAIN_PATH.test(value)) problem ??= `${variable} must be a plain absolute path (got "${value}")`;
    return value;
  });
  if (problem !== undefined) return { problem };
  return { path: unset ? undefined : result };
}

/** Parses the strict path-pattern grammar described at the top of config/routes.yaml. */
export function parsePattern(path: string): { segments: readonly PathSegment[]; rest: boolean } | { problem: string } {
  if (!path.startsWith('/')) return { problem: 'must start with /' };
  if (path === '/') return { segments: Object.freeze([]), rest: false };
  const parts = path.slice(1).split('/');
  const segments: PathSegment[] = [];
  const names = new Set<string>();
  let rest = false;
  for (const [index, part] of parts.entries()) {
    if (part === '**') {
      if (index !== parts.length - 1) return { problem: '/** may only end a pattern' };
      rest = true;
    } else if (part.startsWith('{') && part.endsWith('}')) {
      const name = part.slice(1, -1);
      if (!PARAM_NAME.test(name)) return { problem: `{${name}} is not a valid parameter name` };
      if (names.has(name)) return { problem: `{${name}} appears twice` };
      names.add(name);
      segments.push(Object.freeze({ kind: 'param', name }));
    } else if (part === '') {
      return { problem: 'empty segment (// or a trailing /)' };
    } else if (part === '.' || part === '..') {
      return { problem: 'dot segments are not allowed' };
    } else if (!LITERAL.test(part)) {
      return { problem: `segment "${part}" is neither a literal, a {parameter} nor a final **` };
    } else {
      segments.push(Object.freeze({ kind: 'literal', value: part }));
    }
  }
  return { segments: Object.freeze(segments), rest };
}

/**
 * First path match wins, so a route that an earlier route's pattern covers is dead: refuse
 * it rather than let an operator believe it applies. Routes with the identical path are one
 * group (listed together, each method once) that splits the path by method.
 */
function reachability(spec: RouteSpec, index: number, earlier: readonly { spec: RouteSpec; index: number }[]): Problem[] {
  const last = earlier.at(-1);
  for (const { spec: other, index: otherIndex } of earlier) {
    if (other.path === spec.path) {
      if (last?.spec.path !== spec.path) {
        return [{ field: `routes[${index}].path`, message: `routes with the same path must be listed together (see routes[${otherIndex}])` }];
      }
      // A "*" route takes every method its group has not listed before it: nothing may follow it.
      const overlap = other.methods === '*' ? 'every method' : spec.methods === '*' ? undefined : spec.methods.find((m) => other.methods.includes(m));
      if (overlap !== undefined) {
        return [{ field: `routes[${index}].methods`, message: `unreachable: routes[${otherIndex}] ("${other.name}") has the same path and already serves ${overlap}` }];
      }
    } else if (covers(other, spec)) {
      return [{ field: `routes[${index}].path`, message: `unreachable: routes[${otherIndex}] ("${other.name}", ${other.path}) matches every path it matches` }];
    }
  }
  return [];
}

/** True when every path matching `b` also matches (or is claimed by) `a`. A {param} claims any segment. */
function covers(a: RouteSpec, b: RouteSpec): boolean {
  if (a.rest ? b.segments.length < a.segments.length : b.rest || b.segments.length !== a.segments.length) return false;
  return a.segments.every((segment, i) => {
    const other = b.segments[i]!;
    return segment.kind === 'param' || (other.kind === 'literal' && other.value === segment.value);
  });
}
