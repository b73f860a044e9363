import type { McpTable } from './mcp-table.ts';
import { isReservedPath } from './reserved-paths.ts';
import { parsePattern, type PathSegment } from './route-pattern.ts';
import type { Checked, Problem, RouteRef } from './table-file.ts';
import { MCP_PREFIX, type RouteEntry, type RoutesFile } from './table-schemas.ts';

/**
 * The route table (`config/routes.yaml`) compiled: placeholders substituted, each route's
 * fields checked against each other and the MCP table, and routes that can never match refused.
 */

export type Credential = 'api_key' | 'admin' | 'none';
export type McpTransport = 'streamable' | 'sse' | 'messages';

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

export interface RouteTable {
  /** Scopes declared in routes.yaml for routes (e.g. `events:write`). */
  readonly routeScopes: ReadonlySet<string>;
  /** In match order; routes whose placeholder variable is unset are already dropped. */
  readonly routes: readonly RouteSpec[];
}

export interface TablePaths {
  mcpPath: string;
  mcpSsePath?: string | undefined;
  mcpMessagesPath?: string | undefined;
}

/** What a placeholder variable may hold: a plain absolute path (env.ts checks the same). */
const PLAIN_PATH = /^\/[A-Za-z0-9._~!&'()+,;=:@/-]*$/;
const PLACEHOLDER = /\$\{([^}]*)\}/g;

const PLACEHOLDERS = {
  MCP_PATH: 'mcpPath',
  MCP_SSE_PATH: 'mcpSsePath',
  MCP_MESSAGES_PATH: 'mcpMessagesPath',
} as const satisfies Record<string, keyof TablePaths>;

/** A compiled route and how messages name it. */
interface Placed {
  spec: RouteSpec;
  ref: RouteRef;
}

/** What compiling one route checks it against; `problems` and `names` grow as routes are compiled. */
interface RouteContext {
  readonly problems: Problem[];
  /** How messages name each route of the file, by index. */
  readonly refs: readonly RouteRef[];
  /** Each route's name as written, by index. */
  readonly names: readonly string[];
  readonly routeScopes: ReadonlySet<string>;
  readonly mcp: McpTable;
  readonly paths: TablePaths;
}

export function buildRoutes(file: RoutesFile, mcp: McpTable, paths: TablePaths): Checked<RouteTable> {
  const problems: Problem[] = [];
  const routeScopes = compileRouteScopes(file.scopes, problems);
  // A route is named by its name in messages; by its place when another route has that name too.
  const refs = file.routes.map((raw, index) => ({ name: file.routes.filter((other) => other.name === raw.name).length === 1 ? raw.name : undefined, index }));
  const context: RouteContext = { problems, refs, names: file.routes.map((raw) => raw.name), routeScopes, mcp, paths };
  const routes: Placed[] = [];
  file.routes.forEach((raw, index) => {
    const compiled = compileRoute(raw, index, context);
    if (compiled === undefined) return;
    const { spec, shown } = compiled;
    const ref = refs[index]!;
    for (const problem of reachability(spec, ref, routes)) problems.push({ ...problem, message: problem.message + shown });
    routes.push({ spec, ref });
  });
  checkLegacyPair(routes, problems);

  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, value: { routeScopes, routes: Object.freeze(routes.map((r) => r.spec)) } };
}

/** The route scopes declared; `mcp:` scopes belong to mcp-tools.yaml. */
function compileRouteScopes(scopes: readonly string[], problems: Problem[]): Set<string> {
  const routeScopes = new Set<string>();
  scopes.forEach((scope, index) => {
    if (scope.startsWith(MCP_PREFIX)) {
      problems.push({ field: `scopes[${index}]`, message: 'mcp: scopes are declared in mcp-tools.yaml' });
    } else if (routeScopes.has(scope)) {
      problems.push({ field: `scopes[${index}]`, message: `"${scope}" is listed twice` });
    }
    routeScopes.add(scope);
  });
  return routeScopes;
}

/**
 * One route, or undefined when it has problems (added to the context's) or is dropped (its
 * placeholder variable is unset). `shown` tells, for messages, what a placeholder stood for.
 */
function compileRoute(raw: RouteEntry, index: number, context: RouteContext): { spec: RouteSpec; shown: string } | undefined {
  const { problems } = context;
  const before = problems.length;
  const at = (field: string, message: string) => problems.push({ route: context.refs[index]!, field, message });
  checkRouteFields(raw, index, context);

  const substituted = substitute(raw.path, context.paths);
  if ('problem' in substituted) {
    at('path', substituted.problem);
    return undefined;
  }
  if (substituted.path === undefined) return undefined; // its placeholder variable is unset: dropped
  const pattern = parsePattern(substituted.path);
  const shown = substituted.path === raw.path ? '' : ` (${raw.path} = "${substituted.path}")`;
  if ('problem' in pattern) {
    at('path', pattern.problem + shown);
    return undefined;
  }
  if (isReservedPath(literalPrefix(pattern.segments))) {
    at('path', `lies under a path reserved for the gateway, so it would never be reached${shown}`);
  }
  if (raw.agent_param !== undefined && !pattern.segments.some((s) => s.kind === 'param' && s.name === raw.agent_param)) {
    at('agent_param', `"${raw.agent_param}" is not a {parameter} of the path`);
  }
  if (problems.length > before) return undefined;
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
  return { spec, shown };
}

/** The fields of one route that do not depend on its path: its name, scope, methods, and what applies to its credential. */
function checkRouteFields(raw: RouteEntry, index: number, context: RouteContext): void {
  const { problems, refs, names, routeScopes, mcp } = context;
  const at = (field: string, message: string) => problems.push({ route: refs[index]!, field, message });
  const earlier = names.indexOf(raw.name);
  if (earlier < index) at('name', `"${raw.name}" is already the name of the route at index ${earlier}`);

  if (raw.credential !== 'api_key') {
    for (const key of ['scope', 'agent_param', 'mcp'] as const) {
      if (raw[key] !== undefined) at(key, 'only applies to credential api_key');
    }
  }
  if (raw.scope !== undefined) {
    if (mcp.aliases.has(raw.scope)) {
      at('scope', `"${raw.scope}" is an alias: require one scope`);
    } else if (!routeScopes.has(raw.scope) && !mcp.scopes.has(raw.scope)) {
      at('scope', `unknown scope "${raw.scope}" (declare it under scopes)`);
    }
  }
  if (Array.isArray(raw.methods) && new Set(raw.methods).size !== raw.methods.length) {
    at('methods', 'lists a method twice');
  }
}

/** The legacy MCP transport is a pair: an sse route and a messages route, both or neither. */
function checkLegacyPair(routes: readonly Placed[], problems: Problem[]): void {
  const sse = routes.find((r) => r.spec.mcp === 'sse');
  const messages = routes.find((r) => r.spec.mcp === 'messages');
  if (sse && !messages) {
    problems.push({ route: sse.ref, field: 'mcp', message: 'an sse route needs a messages route: set MCP_MESSAGES_PATH too' });
  } else if (messages && !sse) {
    problems.push({ route: messages.ref, field: 'mcp', message: 'a messages route needs an sse route: set MCP_SSE_PATH too' });
  }
}

/** The literal segments before the first parameter: every path the pattern matches starts with them. */
function literalPrefix(segments: readonly PathSegment[]): string {
  const literals: string[] = [];
  for (const segment of segments) {
    if (segment.kind !== 'literal') break;
    literals.push(segment.value);
  }
  return `/${literals.join('/')}`;
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

/**
 * First path match wins, so a route that an earlier route's pattern covers is dead: refuse
 * it rather than let an operator believe it applies. Routes with the identical path are one
 * group (listed together, each method once) that splits the path by method.
 */
function reachability(spec: RouteSpec, route: RouteRef, earlier: readonly Placed[]): Problem[] {
  const last = earlier.at(-1);
  for (const { spec: other } of earlier) {
    if (other.path === spec.path) {
      if (last?.spec.path !== spec.path) {
        return [{ route, field: 'path', message: `routes with the same path must be listed together (see route "${other.name}")` }];
      }
      // A "*" route takes every method its group has not listed before it: nothing may follow it.
      const overlap = other.methods === '*' ? 'every method' : spec.methods === '*' ? undefined : spec.methods.find((m) => other.methods.includes(m));
      if (overlap !== undefined) {
        return [{ route, field: 'methods', message: `unreachable: route "${other.name}" has the same path and already serves ${overlap}` }];
      }
    } else if (covers(other, spec)) {
      return [{ route, field: 'path', message: `unreachable: route "${other.name}" (${other.path}) matches every path it matches` }];
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
