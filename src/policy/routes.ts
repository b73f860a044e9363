import type { Credential, McpTransport, PathSegment, RouteSpec, Tables } from '../config/tables.ts';
import type { LicensedFeature } from '../config/env.ts';

/** A route of `config/routes.yaml`, ready for `decide()`. */
export interface CompiledRoute {
  /** Unique; the `route` metrics label. */
  readonly name: string;
  /** The pattern (after placeholder substitution), never the request path. */
  readonly path: string;
  readonly methods: readonly string[] | '*';
  readonly credential: Credential;
  /** Scope the route requires, if any. */
  readonly scope: string | undefined;
  /** Licensed feature behind `scope` (only when `scope` is a licensed MCP scope). */
  readonly feature: LicensedFeature | undefined;
  /** Path parameter naming the agent a bound key must match. */
  readonly agentParam: string | undefined;
  readonly mcp: McpTransport | undefined;
}

export type RouteMatch =
  | { readonly error?: undefined; readonly route: CompiledRoute; readonly params: Readonly<Record<string, number>> }
  /** The path has this route's shape but `param` is not a canonical positive integer: 400. */
  | { readonly error: 'bad_param'; readonly route: CompiledRoute; readonly param: string }
  /** The path is this route's, the method is not: 405 with `Allow: allow.join(', ')`. */
  | { readonly error: 'method_not_allowed'; readonly route: CompiledRoute; readonly allow: readonly string[] };

export interface RouteMatcher {
  readonly routes: readonly CompiledRoute[];
  /**
   * First route whose path matches claims the request; `undefined` when none does (404).
   * `path` is already normalised by the HTTP layer, without query string.
   */
  match(method: string, path: string): RouteMatch | undefined;
}

/** Compiles the route table once into a matcher: per request, a scan of pre-split literals, no regex. */
export function compileRoutes(tables: Tables): RouteMatcher {
  const groups: PathGroup[] = [];
  const routes: CompiledRoute[] = [];
  for (const spec of tables.routes) {
    const route = compileRoute(spec, tables);
    routes.push(route);
    const last = groups.at(-1);
    if (last && last.path === spec.path) addToGroup(last, route);
    else groups.push(newGroup(spec, route));
  }
  for (const group of groups) Object.freeze(group.allow.sort());
  return Object.freeze({
    routes: Object.freeze(routes),
    match: (method: string, path: string) => matchGroups(groups, method, path),
  });
}

function compileRoute(spec: RouteSpec, tables: Tables): CompiledRoute {
  return Object.freeze({
    name: spec.name,
    path: spec.path,
    methods: spec.methods,
    credential: spec.credential,
    scope: spec.scope,
    feature: spec.scope === undefined ? undefined : tables.mcp.scopes.get(spec.scope)?.feature,
    agentParam: spec.agentParam,
    mcp: spec.mcp,
  });
}

/** Routes sharing one path pattern; the method picks among them. */
interface PathGroup {
  readonly path: string;
  /** Literal text per segment, `undefined` for a parameter. */
  readonly literals: readonly (string | undefined)[];
  readonly paramNames: readonly string[];
  readonly rest: boolean;
  readonly byMethod: Map<string, Target>;
  anyMethod: Target | undefined;
  readonly allow: string[];
  readonly first: CompiledRoute;
  readonly methodNotAllowed: RouteMatch;
}

/** A route and, for routes without parameters, its one precomputed match result. */
interface Target {
  readonly route: CompiledRoute;
  readonly fixed: RouteMatch | undefined;
}

const NO_PARAMS: Readonly<Record<string, number>> = Object.freeze({});

function newGroup(spec: RouteSpec, route: CompiledRoute): PathGroup {
  const allow: string[] = [];
  const group: PathGroup = {
    path: spec.path,
    literals: spec.segments.map((segment: PathSegment) => (segment.kind === 'literal' ? segment.value : undefined)),
    paramNames: spec.segments.flatMap((segment) => (segment.kind === 'param' ? [segment.name] : [])),
    rest: spec.rest,
    byMethod: new Map(),
    anyMethod: undefined,
    allow,
    first: route,
    methodNotAllowed: Object.freeze({ error: 'method_not_allowed' as const, route, allow }),
  };
  addToGroup(group, route);
  return group;
}

function addToGroup(group: PathGroup, route: CompiledRoute): void {
  const target: Target = {
    route,
    fixed: group.paramNames.length === 0 ? Object.freeze({ route, params: NO_PARAMS }) : undefined,
  };
  // The loader refuses overlapping methods in a group; first one wins regardless.
  if (route.methods === '*') {
    group.anyMethod ??= target;
    return;
  }
  for (const method of route.methods) {
    if (!group.byMethod.has(method)) {
      group.byMethod.set(method, target);
      group.allow.push(method);
    }
  }
}

function matchGroups(groups: readonly PathGroup[], method: string, path: string): RouteMatch | undefined {
  for (const group of groups) {
    if (!hasShape(group, path)) continue;
    const target = group.byMethod.get(method) ?? group.anyMethod;
    if (target?.fixed) return target.fixed;
    const params = readParams(group, path);
    if (typeof params === 'string') return { error: 'bad_param', route: target?.route ?? group.first, param: params };
    if (target === undefined) return group.methodNotAllowed;
    return { route: target.route, params };
  }
  return undefined;
}

/**
 * True when `path` has the group's literals at their places and the right number of
 * segments; a parameter position accepts any segment here (its value is checked after).
 */
function hasShape(group: PathGroup, path: string): boolean {
  if (path.charCodeAt(0) !== SLASH) return false;
  const { literals } = group;
  let start = 1;
  for (let i = 0; i < literals.length; i++) {
    if (start > path.length) return false;
    let end = path.indexOf('/', start);
    if (end === -1) end = path.length;
    const literal = literals[i];
    if (literal !== undefined && (end - start !== literal.length || !path.startsWith(literal, start))) return false;
    start = end + 1;
  }
  // Here `start` is one past the slash ending the last pattern segment, or length + 1
  // when the path ended there; `/**` accepts both, an exact pattern only the latter.
  if (group.rest) return true;
  return literals.length === 0 ? path.length === 1 : start === path.length + 1;
}

/** The parameter values, or the name of the first parameter that is not a canonical positive integer. */
function readParams(group: PathGroup, path: string): Record<string, number> | string {
  const params: Record<string, number> = {};
  const { literals, paramNames } = group;
  let start = 1;
  let p = 0;
  for (let i = 0; i < literals.length; i++) {
    let end = path.indexOf('/', start);
    if (end === -1) end = path.length;
    if (literals[i] === undefined) {
      const name = paramNames[p++]!;
      const value = positiveInteger(path, start, end);
      if (value === undefined) return name;
      params[name] = value;
    }
    start = end + 1;
  }
  return params;
}

const SLASH = 0x2f;
const ZERO = 0x30;
const NINE = 0x39;
const MAX_DIGITS = String(Number.MAX_SAFE_INTEGER).length;

/** `[1-9][0-9]*` up to Number.MAX_SAFE_INTEGER, read in place; anything else is `undefined`. */
function positiveInteger(text: string, start: number, end: number): number | undefined {
  const length = end - start;
  if (length === 0 || length > MAX_DIGITS) return undefined;
  const first = text.charCodeAt(start);
  if (first <= ZERO || first > NINE) return undefined;
  let value = 0;
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i);
    if (code < ZERO || code > NINE) return undefined;
    value = value * 10 + (code - ZERO);
  }
  return value <= Number.MAX_SAFE_INTEGER ? value : undefined;
}
