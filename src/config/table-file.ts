import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';

/**
 * Reading a table file against its schema, and the errors it raises: every problem found,
 * the file named once, each problem by its field, and a route's by the route's name
 * (`config/routes.yaml: route "events": credential: …`); a problem shared by several routes is
 * said once for all of them (`routes "events", "mcp": credential: …`).
 */

/** A route as a message names it: by its name, or by its place when it has no name of its own. */
export interface RouteRef {
  /** Undefined when the route has none, or one another route has too. */
  name: string | undefined;
  index: number;
}

/** A problem found in a file: the field path as printed (within `route`, when it is a route's), and what is wrong. */
export interface Problem {
  field: string;
  message: string;
  route?: RouteRef;
}

/** Where in a file a schema issue lies: a route's own field, or anywhere else. */
export type Locate = (path: readonly PropertyKey[]) => { route: RouteRef; path: readonly PropertyKey[] } | undefined;

export type Checked<T> = { ok: true; value: T } | { ok: false; problems: Problem[] };

export function parseFile<S extends z.ZodType>(file: string, schema: S, locate?: (data: unknown) => Locate): z.output<S> {
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
    const where = locate?.(data);
    fail(
      file,
      result.error.issues.map((issue) => {
        const unknown = issue.code === 'unrecognized_keys';
        const path = unknown ? [...issue.path, issue.keys[0] ?? ''] : issue.path;
        const message = unknown ? `unknown field (${issue.keys.join(', ')})` : issue.message;
        const located = where?.(path);
        return located === undefined ? { field: fieldOf(path), message } : { field: fieldOf(located.path), message, route: located.route };
      }),
    );
  }
  return result.data;
}

/** `Locate` for a file whose `routes` list holds named routes (routes.yaml). */
export function routesIn(data: unknown): Locate {
  const routes = typeof data === 'object' && data !== null && Array.isArray((data as { routes?: unknown }).routes) ? ((data as { routes: unknown[] }).routes) : [];
  const names = routes.map((route) => (typeof route === 'object' && route !== null ? (route as { name?: unknown }).name : undefined));
  return (path) => {
    if (path[0] !== 'routes' || typeof path[1] !== 'number') return undefined;
    const index = path[1];
    const name = names[index];
    const unique = typeof name === 'string' && name !== '' && names.indexOf(name) === names.lastIndexOf(name);
    return { route: { name: unique ? name : undefined, index }, path: path.slice(2) };
  };
}

export function check<T>(file: string, checked: Checked<T>): T {
  if (!checked.ok) fail(file, checked.problems);
  return checked.value;
}

function fail(file: string, problems: readonly Problem[]): never {
  // The same problem of several routes (a misspelt field in each) is one entry naming them all.
  const entries = new Map<string, { problem: Problem; routes: RouteRef[] }>();
  problems.forEach((problem, n) => {
    const key = problem.route === undefined ? `#${n}` : `${problem.field}\0${problem.message}`;
    const entry = entries.get(key);
    if (entry === undefined) entries.set(key, { problem, routes: problem.route === undefined ? [] : [problem.route] });
    else entry.routes.push(problem.route!);
  });
  const said = [...entries.values()].map(({ problem, routes }) => {
    const at = routes.length === 0 ? problem.field || '(top level)' : [routesNamed(routes), problem.field].filter(Boolean).join(': ');
    return `${at}: ${problem.message}`;
  });
  throw new Error(`${file}: ${said.join('; ')}`);
}

/** `route "events"`, `routes "events", "mcp"`, `route at index 3` (a route with no name of its own). */
function routesNamed(routes: readonly RouteRef[]): string {
  const named = routes.map((route) => (route.name === undefined ? `at index ${route.index}` : `"${route.name}"`));
  return `${routes.length === 1 ? 'route' : 'routes'} ${named.join(', ')}`;
}

/** `routes[2].credential`, `scopes["mcp:calls"].tools[0]`. */
export function fieldOf(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) out += out ? `.${key}` : key;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}
