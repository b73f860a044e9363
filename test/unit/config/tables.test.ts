import { describe, expect, it } from 'vitest';
import { knownScopes, loadTables, MCP_TOOLS_FILE, ROUTES_FILE } from '../../../src/config/tables.ts';
import type { TablePaths } from '../../../src/config/tables.ts';
import { CONFIG_DIR, DEFAULT_PATHS, defaultTables, defaultYaml, LEGACY_PATHS, routesWith, withConfig } from '../policy/support.ts';

type Yaml = Record<string, unknown>;
type RoutesYaml = { scopes: string[]; routes: Record<string, unknown>[] };

/** The default routes.yaml with route `index` changed (`undefined` values delete a field). */
function routeEdited(index: number, change: Record<string, unknown>): Yaml {
  const routes = defaultYaml().routes as RoutesYaml;
  const edited = { ...routes.routes[index], ...change };
  for (const [key, value] of Object.entries(change)) if (value === undefined) delete edited[key];
  routes.routes[index] = edited;
  return routes;
}

function toolsEdited(edit: (tools: Yaml) => void): Yaml {
  const { tools } = defaultYaml();
  edit(tools);
  return tools;
}

/** The error message of loading these files, or 'loaded'. */
function loadError(files: { routes?: unknown; tools?: unknown }, paths: TablePaths = DEFAULT_PATHS): string {
  return withConfig(files, (dir) => {
    try {
      loadTables(dir, paths);
      return 'loaded';
    } catch (error) {
      return (error as Error).message;
    }
  });
}

describe('loadTables: the shipped defaults (docs/mcp.md and docs/configuration.md tables)', () => {
  it('loads the route table with the legacy transport unset', () => {
    const tables = defaultTables(DEFAULT_PATHS);
    expect(tables.routes.map((r) => [r.name, r.path, r.methods, r.credential, r.scope, r.agentParam, r.mcp])).toEqual([
      ['events', '/api/v1/agents/{agent_id}/events', '*', 'api_key', 'events:write', 'agent_id', undefined],
      ['mcp', '/mcp', ['POST', 'GET', 'DELETE'], 'api_key', undefined, undefined, 'streamable'],
      ['admin', '/**', '*', 'admin', undefined, undefined, undefined],
    ]);
  });

  it('adds the legacy transport when both paths are set', () => {
    const tables = defaultTables(LEGACY_PATHS);
    expect(tables.routes.map((r) => [r.name, r.path, r.methods, r.mcp])).toEqual([
      ['events', '/api/v1/agents/{agent_id}/events', '*', undefined],
      ['mcp', '/mcp', ['POST', 'GET', 'DELETE'], 'streamable'],
      ['mcp_sse', '/sse', ['GET'], 'sse'],
      ['mcp_messages', '/messages', ['POST'], 'messages'],
      ['admin', '/**', '*', undefined],
    ]);
  });

  it('loads the tool table of docs/mcp.md', () => {
    const { mcp } = defaultTables();
    expect(Object.fromEntries([...mcp.scopes].map(([name, s]) => [name, { feature: s.feature, tools: s.tools }]))).toEqual({
      'mcp:calls': { feature: undefined, tools: ['place_outbound_call'] },
      'mcp:knowledge': { feature: undefined, tools: ['search_knowledge_base'] },
      'mcp:transcripts': { feature: undefined, tools: ['fetch_call_transcript'] },
      'mcp:agents': { feature: undefined, tools: ['list_agents', 'get_agent_status'] },
      'mcp:events': { feature: 'events', tools: ['record_event'] },
      'mcp:recall': { feature: 'recall', tools: ['lookup_end_user'] },
      'mcp:custom_tools': { feature: 'custom_tools', tools: ['call_custom_tool'] },
      'mcp:orchestrate': { feature: 'orchestrate', tools: ['delegate_task_to_orchestrator'] },
    });
    expect(mcp.tools.get('get_agent_status')).toEqual({ name: 'get_agent_status', scope: 'mcp:agents', feature: undefined });
    expect(mcp.tools.get('record_event')).toEqual({ name: 'record_event', scope: 'mcp:events', feature: 'events' });
    expect(mcp.tools.size).toBe(9);
    expect(Object.fromEntries(mcp.aliases)).toEqual({ 'mcp:tools': ['mcp:calls', 'mcp:knowledge', 'mcp:transcripts'] });
    expect(Object.fromEntries(mcp.methods)).toEqual({
      initialize: 'any_mcp',
      ping: 'any_mcp',
      'tools/list': 'any_mcp',
      // Connection methods: every table opens them.
      'notifications/initialized': 'any_mcp',
      'server/discover': 'any_mcp',
    });
    expect(mcp.methodPrefixes).toEqual([{ prefix: 'notifications/', rule: 'any_mcp' }]);
    expect(mcp.responses).toBe('any_mcp');
  });

  it('knownScopes: route scopes, MCP scopes and aliases', () => {
    expect([...knownScopes(defaultTables())].sort()).toEqual(
      ['events:write', 'mcp:agents', 'mcp:calls', 'mcp:custom_tools', 'mcp:events', 'mcp:knowledge', 'mcp:orchestrate', 'mcp:recall', 'mcp:tools', 'mcp:transcripts'].sort(),
    );
  });

  it('returns frozen data', () => {
    const tables = defaultTables();
    expect(Object.isFrozen(tables)).toBe(true);
    expect(Object.isFrozen(tables.routes)).toBe(true);
    expect(Object.isFrozen(tables.routes[0])).toBe(true);
  });

  it('substitutes a configured MCP_PATH', () => {
    expect(defaultTables({ mcpPath: '/v2/mcp-server' }).routes[1]!.path).toBe('/v2/mcp-server');
  });

  it('accepts an operator public route', () => {
    const routes = routesWith({ name: 'assets', path: '/assets/**', methods: ['GET', 'HEAD'], credential: 'none' });
    expect(loadError({ routes })).toBe('loaded');
  });

  it('accepts routes whose paths only start like a reserved one, or whose parameter may stand for one', () => {
    const routes = routesWith(
      { name: 'docsx', path: '/docsx/**', methods: ['GET'], credential: 'none' },
      { name: 'authors', path: '/api/v1/authors', methods: ['GET'], credential: 'none' },
      { name: 'kinds', path: '/api/v1/{kind}/x', methods: ['GET'], credential: 'none' },
    );
    expect(loadError({ routes })).toBe('loaded');
  });
});

const ROUTES = `${ROUTES_FILE}: `;

/**
 * How a message names a field of a route (`routes[0].credential` in the file): by the route's
 * name (`route "events": credential`), or by its place when it has none or shares it.
 */
function byName(routes: unknown, field: string): string {
  const match = /^routes\[(\d+)\]\.?(.*)$/.exec(field);
  if (match === null) return field;
  const index = Number(match[1]);
  const names = (routes as RoutesYaml).routes.map((route) => route.name);
  const name = names[index];
  const label = typeof name === 'string' && names.indexOf(name) === names.lastIndexOf(name) ? `route "${name}"` : `route at index ${index}`;
  return match[2] === '' ? label : `${label}: ${match[2]}`;
}
const TOOLS = `${MCP_TOOLS_FILE}: `;

describe('loadTables: routes.yaml errors name the file and the field', () => {
  const cases: { description: string; routes: unknown; paths?: TablePaths; field: string }[] = [
    { description: 'unknown field in a route', routes: routeEdited(0, { colour: 'blue' }), field: 'routes[0].colour' },
    { description: 'unknown top-level field', routes: { ...defaultYaml().routes, extra: 1 }, field: 'extra' },
    { description: 'unknown credential kind', routes: routeEdited(0, { credential: 'jwt' }), field: 'routes[0].credential' },
    { description: 'missing credential', routes: routeEdited(4, { credential: undefined }), field: 'routes[4].credential' },
    { description: 'missing name', routes: routeEdited(0, { name: undefined }), field: 'routes[0].name' },
    { description: 'name that is no metrics label', routes: routeEdited(0, { name: 'Events Route' }), field: 'routes[0].name' },
    { description: 'duplicate route names', routes: routeEdited(1, { name: 'events' }), field: 'routes[1].name' },
    { description: 'a scope no table declares', routes: routeEdited(0, { scope: 'event:write' }), field: 'routes[0].scope' },
    { description: 'an alias as a route scope', routes: routeEdited(0, { scope: 'mcp:tools' }), field: 'routes[0].scope' },
    { description: 'a scope on an admin route', routes: routeEdited(4, { scope: 'events:write' }), field: 'routes[4].scope' },
    { description: 'a scope on a public route', routes: routesWith({ name: 'pub', path: '/pub', methods: ['GET'], credential: 'none', scope: 'events:write' }), field: 'routes[4].scope' },
    { description: 'agent_param that is not a parameter of the path', routes: routeEdited(0, { agent_param: 'agent' }), field: 'routes[0].agent_param' },
    { description: 'agent_param on an admin route', routes: routesWith({ name: 'x', path: '/x/{id}', methods: '*', credential: 'admin', agent_param: 'id' }), field: 'routes[4].agent_param' },
    { description: 'mcp on an admin route', routes: routeEdited(1, { credential: 'admin' }), field: 'routes[1].mcp' },
    { description: 'unknown mcp transport', routes: routeEdited(1, { mcp: 'websocket' }), field: 'routes[1].mcp' },
    { description: 'lower-case method', routes: routeEdited(1, { methods: ['POST', 'get'] }), field: 'routes[1].methods[1]' },
    { description: 'empty method list', routes: routeEdited(1, { methods: [] }), field: 'routes[1].methods' },
    { description: 'a method listed twice', routes: routeEdited(1, { methods: ['POST', 'POST'] }), field: 'routes[1].methods' },
    { description: 'methods "any"', routes: routeEdited(0, { methods: 'any' }), field: 'routes[0].methods' },
    { description: 'no routes', routes: { scopes: [], routes: [] }, field: 'routes' },
    { description: 'a route scope in the mcp: namespace', routes: { ...defaultYaml().routes, scopes: ['events:write', 'mcp:extra'] }, field: 'scopes[1]' },
    { description: 'a route scope with a wildcard', routes: { ...defaultYaml().routes, scopes: ['events:*'] }, field: 'scopes[0]' },
    { description: 'a route scope declared twice', routes: { ...defaultYaml().routes, scopes: ['events:write', 'events:write'] }, field: 'scopes[1]' },
    { description: 'an unknown placeholder', routes: routeEdited(1, { path: '${MCP_URL}' }), field: 'routes[1].path' },
    { description: 'MCP_PATH with a trailing slash', routes: defaultYaml().routes, paths: { mcpPath: '/mcp/' }, field: 'routes[1].path' },
    { description: 'MCP_PATH that is no plain path', routes: defaultYaml().routes, paths: { mcpPath: '/mcp/{x}' }, field: 'routes[1].path' },
    { description: 'MCP_PATH inside the events route', routes: defaultYaml().routes, paths: { mcpPath: '/api/v1/agents/1/events' }, field: 'routes[1].path' },
    { description: 'MCP_SSE_PATH equal to MCP_PATH', routes: defaultYaml().routes, paths: { mcpPath: '/mcp', mcpSsePath: '/mcp', mcpMessagesPath: '/messages' }, field: 'routes[2].methods' },
    { description: 'only MCP_SSE_PATH set', routes: defaultYaml().routes, paths: { mcpPath: '/mcp', mcpSsePath: '/sse' }, field: 'routes[2].mcp' },
    { description: 'only MCP_MESSAGES_PATH set', routes: defaultYaml().routes, paths: { mcpPath: '/mcp', mcpMessagesPath: '/messages' }, field: 'routes[3].mcp' },
    { description: 'a route after the catch-all is unreachable', routes: { ...defaultYaml().routes, routes: [...(defaultYaml().routes as RoutesYaml).routes, { name: 'late', path: '/assets/**', methods: ['GET'], credential: 'none' }] }, field: 'routes[5].path' },
    { description: 'a route shadowed by an earlier parameter', routes: routesWith({ name: 'special', path: '/api/v1/agents/special/events', methods: ['GET'], credential: 'none' }), field: 'routes[4].path' },
    { description: 'the same path split by method, not listed together', routes: routesWith({ name: 'a', path: '/a', methods: ['GET'], credential: 'none' }, { name: 'b', path: '/b', methods: ['GET'], credential: 'none' }, { name: 'a2', path: '/a', methods: ['POST'], credential: 'admin' }), field: 'routes[6].path' },
    { description: 'the same path and method twice', routes: routesWith({ name: 'a', path: '/a', methods: ['GET', 'HEAD'], credential: 'none' }, { name: 'a2', path: '/a', methods: ['HEAD'], credential: 'admin' }), field: 'routes[5].methods' },
    { description: 'a route under the docs, which are the gateway\'s', routes: routesWith({ name: 'x', path: '/docs/**', methods: ['GET'], credential: 'none' }), field: 'routes[4].path' },
    { description: 'a route under the key endpoints', routes: routesWith({ name: 'x', path: '/api/v1/api-keys/{id}/x', methods: '*', credential: 'admin' }), field: 'routes[4].path' },
    { description: 'a route under the audit prefix', routes: routesWith({ name: 'x', path: '/api/v1/audit-log', methods: ['GET'], credential: 'admin' }), field: 'routes[4].path' },
    { description: 'a route under the console, in another case', routes: routesWith({ name: 'x', path: '/Console', methods: ['GET'], credential: 'none' }), field: 'routes[4].path' },
    { description: 'MCP_PATH under a reserved path', routes: defaultYaml().routes, paths: { mcpPath: '/api/v1/auth/mcp' }, field: 'routes[1].path' },
    { description: 'a route after a "*" route of the same path', routes: routesWith({ name: 'a', path: '/a', methods: '*', credential: 'none' }, { name: 'a2', path: '/a', methods: ['POST'], credential: 'admin' }), field: 'routes[5].methods' },
  ];
  const badPatterns = ['a/b', '/a//b', '/a/', '/a/**/b', '/a/*', '/a/*.js', '/a/{1x}', '/a/{}', '/a/{id}/{id}', '/a/../b', '/a/./b', '/a/%2F', '/a/$x', '/a/{id', '/a/b c', '/a/{id}x', ''];
  for (const pattern of badPatterns) {
    cases.push({ description: `bad pattern ${JSON.stringify(pattern)}`, routes: routesWith({ name: 'x', path: pattern, methods: '*', credential: 'none' }), field: 'routes[4].path' });
  }

  it.each(cases)('$description → $field', ({ routes, paths, field }) => {
    const message = loadError({ routes }, paths);
    expect(message).toContain(`${ROUTES}${byName(routes, field)}: `);
  });

  it('names a route by its name, and says a problem of several routes once for all of them', () => {
    const routes = defaultYaml().routes as RoutesYaml;
    for (const route of routes.routes) if (route.credential === 'api_key') route.credential = 'apikey';
    const message = loadError({ routes }, LEGACY_PATHS);
    expect(message).toMatch(new RegExp(`^[^;]*${ROUTES}routes "events", "mcp", "mcp_sse", "mcp_messages": credential: [^;]*$`));
    expect(message).not.toContain('routes[');
    expect(message.split(ROUTES_FILE)).toHaveLength(2);
  });

  it('names a route that has no name of its own, or another route\'s, by its place', () => {
    expect(loadError({ routes: routeEdited(1, { name: 'events' }) })).toContain(`${ROUTES}route at index 1: name: "events" is already the name of the route at index 0`);
    expect(loadError({ routes: routeEdited(0, { name: undefined, credential: 'jwt' }) })).toMatch(/route at index 0: name: .*; route at index 0: credential: /);
  });

  it('invalid YAML names the file', () => {
    expect(loadError({ routes: 'routes:\n  - name: x\n    methods: *\n' })).toContain(`${ROUTES}invalid YAML`);
  });

  it('duplicate YAML keys are refused', () => {
    expect(loadError({ routes: 'scopes: []\nscopes: []\nroutes: []\n' })).toContain(`${ROUTES}invalid YAML`);
  });

  it('a missing file names the file', () => {
    expect(loadError({ routes: null })).toContain(`${ROUTES}cannot read`);
  });

  it('an empty file names the missing field', () => {
    expect(loadError({ routes: '' })).toContain(`${ROUTES}routes: `);
  });

  it('the path of the config directory is part of the message', () => {
    withConfig({ routes: routeEdited(0, { credential: 'jwt' }) }, (dir) => {
      expect(() => loadTables(dir, DEFAULT_PATHS)).toThrow(`${dir}/${ROUTES_FILE}: route "events": credential: `);
    });
  });
});

describe('loadTables: mcp-tools.yaml errors name the file and the field', () => {
  const cases: { description: string; tools: Yaml; field: string }[] = [
    { description: 'a tool under two scopes', tools: toolsEdited((t) => ((t.scopes as Yaml)['mcp:knowledge'] = { tools: ['place_outbound_call'] })), field: 'scopes["mcp:knowledge"].tools[0]' },
    { description: 'a tool twice under one scope', tools: toolsEdited((t) => ((t.scopes as Yaml)['mcp:agents'] = { tools: ['list_agents', 'list_agents'] })), field: 'scopes["mcp:agents"].tools[1]' },
    { description: 'an alias naming an unknown scope', tools: toolsEdited((t) => ((t.aliases as Yaml)['mcp:tools'] = ['mcp:calls', 'mcp:call'])), field: 'aliases["mcp:tools"][1]' },
    { description: 'an alias naming an alias', tools: toolsEdited((t) => ((t.aliases as Yaml)['mcp:all'] = ['mcp:tools'])), field: 'aliases["mcp:all"][0]' },
    { description: 'an alias with the name of a scope', tools: toolsEdited((t) => ((t.aliases as Yaml)['mcp:calls'] = ['mcp:knowledge'])), field: 'aliases["mcp:calls"]' },
    { description: 'an empty alias', tools: toolsEdited((t) => ((t.aliases as Yaml)['mcp:none'] = [])), field: 'aliases["mcp:none"]' },
    { description: 'an unknown licensed feature', tools: toolsEdited((t) => ((t.scopes as Yaml)['mcp:events'] = { feature: 'eventing', tools: ['record_event'] })), field: 'scopes["mcp:events"].feature' },
    { description: 'a scope outside mcp:', tools: toolsEdited((t) => ((t.scopes as Yaml)['tools:x'] = { tools: ['x'] })), field: 'scopes["tools:x"]' },
    { description: 'a wildcard scope', tools: toolsEdited((t) => ((t.scopes as Yaml)['mcp:*'] = { tools: ['x'] })), field: 'scopes["mcp:*"]' },
    { description: 'unknown field in a scope', tools: toolsEdited((t) => ((t.scopes as Yaml)['mcp:calls'] = { tools: ['place_outbound_call'], licensed: true })), field: 'scopes["mcp:calls"].licensed' },
    { description: 'a scope without tools', tools: toolsEdited((t) => ((t.scopes as Yaml)['mcp:calls'] = { tools: [] })), field: 'scopes["mcp:calls"].tools' },
    { description: 'a tool name with a space', tools: toolsEdited((t) => ((t.scopes as Yaml)['mcp:calls'] = { tools: ['place call'] })), field: 'scopes["mcp:calls"].tools[0]' },
    { description: 'tools/call in methods', tools: toolsEdited((t) => ((t.methods as Yaml)['tools/call'] = 'any_mcp')), field: 'methods["tools/call"]' },
    { description: 'a connection method denied', tools: toolsEdited((t) => ((t.methods as Yaml).initialize = 'deny')), field: 'methods.initialize' },
    { description: 'server/discover behind one scope', tools: toolsEdited((t) => ((t.methods as Yaml)['server/discover'] = 'mcp:calls')), field: 'methods["server/discover"]' },
    { description: 'a bare * in methods', tools: toolsEdited((t) => ((t.methods as Yaml)['*'] = 'any_mcp')), field: 'methods["*"]' },
    { description: 'an unknown method requirement', tools: toolsEdited((t) => ((t.methods as Yaml).ping = 'anyone')), field: 'methods.ping' },
    { description: 'an alias as method requirement', tools: toolsEdited((t) => ((t.methods as Yaml)['prompts/get'] = 'mcp:tools')), field: 'methods["prompts/get"]' },
    { description: 'an unknown responses requirement', tools: toolsEdited((t) => (t.responses = 'allow')), field: 'responses' },
    { description: 'unknown top-level field', tools: toolsEdited((t) => (t.tools = {})), field: 'tools' },
    { description: 'no scopes', tools: toolsEdited((t) => (t.scopes = {})), field: 'scopes' },
  ];

  it.each(cases)('$description → $field', ({ tools, field }) => {
    expect(loadError({ tools })).toContain(`${TOOLS}${field}: `);
  });

  it('a missing file names the file', () => {
    expect(loadError({ tools: null })).toContain(`${TOOLS}cannot read`);
  });

  it('responses default to deny', () => {
    const tools = toolsEdited((t) => delete t.responses);
    expect(withConfig({ tools }, (dir) => loadTables(dir, DEFAULT_PATHS).mcp.responses)).toBe('deny');
  });

  it('the shipped config directory is the one tested', () => {
    expect(CONFIG_DIR.endsWith('config')).toBe(true);
  });
});
