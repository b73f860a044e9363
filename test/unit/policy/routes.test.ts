import { describe, expect, it } from 'vitest';
import { compileRoutes } from '../../../src/policy/routes.ts';
import type { RouteMatch } from '../../../src/policy/routes.ts';
import { defaultTables, DEFAULT_PATHS, routesWith, tablesFrom } from './support.ts';

/** What a match comes to, in one comparable shape. */
function outcome(match: RouteMatch | undefined): unknown {
  if (match === undefined) return 'none';
  if (match.error === 'bad_param') return { bad_param: match.param, route: match.route.name };
  if (match.error === 'method_not_allowed') return { method_not_allowed: match.allow, route: match.route.name };
  return { route: match.route.name, params: match.params };
}

describe('compileRoutes: the default table (docs/configuration.md)', () => {
  const matcher = compileRoutes(defaultTables());
  const cases: { description: string; method: string; path: string; expected: unknown }[] = [
    { description: 'events, POST', method: 'POST', path: '/api/v1/agents/1/events', expected: { route: 'events', params: { agent_id: 1 } } },
    { description: 'events, any method (GET)', method: 'GET', path: '/api/v1/agents/42/events', expected: { route: 'events', params: { agent_id: 42 } } },
    { description: 'events, any method (PATCH)', method: 'PATCH', path: '/api/v1/agents/42/events', expected: { route: 'events', params: { agent_id: 42 } } },
    { description: 'events, unusual method', method: 'PROPFIND', path: '/api/v1/agents/42/events', expected: { route: 'events', params: { agent_id: 42 } } },
    { description: 'events, largest safe agent id', method: 'POST', path: '/api/v1/agents/9007199254740991/events', expected: { route: 'events', params: { agent_id: 9007199254740991 } } },
    { description: 'events with a trailing slash is another path (admin)', method: 'POST', path: '/api/v1/agents/1/events/', expected: { route: 'admin', params: {} } },
    { description: 'below events is another path (admin)', method: 'POST', path: '/api/v1/agents/1/events/x', expected: { route: 'admin', params: {} } },
    { description: 'the agent itself is an admin path', method: 'GET', path: '/api/v1/agents/1', expected: { route: 'admin', params: {} } },
    { description: 'literals are case-sensitive', method: 'POST', path: '/API/v1/agents/1/events', expected: { route: 'admin', params: {} } },
    { description: 'a longer literal is not the literal', method: 'POST', path: '/api/v1/agentsx/1/events', expected: { route: 'admin', params: {} } },
    { description: 'MCP POST', method: 'POST', path: '/mcp', expected: { route: 'mcp', params: {} } },
    { description: 'MCP GET', method: 'GET', path: '/mcp', expected: { route: 'mcp', params: {} } },
    { description: 'MCP DELETE', method: 'DELETE', path: '/mcp', expected: { route: 'mcp', params: {} } },
    { description: 'MCP PUT is a 405, never the admin catch-all', method: 'PUT', path: '/mcp', expected: { method_not_allowed: ['DELETE', 'GET', 'POST'], route: 'mcp' } },
    { description: 'MCP HEAD is a 405 (not implied by GET)', method: 'HEAD', path: '/mcp', expected: { method_not_allowed: ['DELETE', 'GET', 'POST'], route: 'mcp' } },
    { description: 'below the MCP path is admin', method: 'POST', path: '/mcp/x', expected: { route: 'admin', params: {} } },
    { description: 'a path starting like MCP is admin', method: 'POST', path: '/mcpx', expected: { route: 'admin', params: {} } },
    { description: 'legacy SSE stream', method: 'GET', path: '/sse', expected: { route: 'mcp_sse', params: {} } },
    { description: 'legacy SSE stream, POST is a 405', method: 'POST', path: '/sse', expected: { method_not_allowed: ['GET'], route: 'mcp_sse' } },
    { description: 'legacy messages', method: 'POST', path: '/messages', expected: { route: 'mcp_messages', params: {} } },
    { description: 'legacy messages, GET is a 405', method: 'GET', path: '/messages', expected: { method_not_allowed: ['POST'], route: 'mcp_messages' } },
    { description: 'root is admin', method: 'GET', path: '/', expected: { route: 'admin', params: {} } },
    { description: 'anything else is admin', method: 'DELETE', path: '/dashboard/settings/keys', expected: { route: 'admin', params: {} } },
    { description: 'not an absolute path: nothing', method: 'GET', path: 'api', expected: 'none' },
  ];
  it.each(cases)('$description: $method $path', ({ method, path, expected }) => {
    expect(outcome(matcher.match(method, path))).toEqual(expected);
  });

  const badIds = ['02', '0', '00', '+2', '-1', '2.0', '1e3', '0x1', 'abc', '', ' 1', '1 ', '%31', '１', '9007199254740992', '99999999999999999999', '1'.repeat(400)];
  it.each(badIds)('agent id %j in the events path is a bad parameter (400), decided by the events route', (id) => {
    expect(outcome(matcher.match('POST', `/api/v1/agents/${id}/events`))).toEqual({ bad_param: 'agent_id', route: 'events' });
  });

  it('a bad id where the rest of the path is not the events route falls through', () => {
    expect(outcome(matcher.match('POST', '/api/v1/agents/abc/other'))).toEqual({ route: 'admin', params: {} });
  });

  it('lists the compiled routes in table order', () => {
    expect(matcher.routes.map((route) => route.name)).toEqual(['events', 'mcp', 'mcp_sse', 'mcp_messages', 'admin']);
    expect(matcher.routes.map((route) => route.path)).toEqual(['/api/v1/agents/{agent_id}/events', '/mcp', '/sse', '/messages', '/**']);
  });

  it('drops the legacy transport when its variables are unset', () => {
    const plain = compileRoutes(defaultTables(DEFAULT_PATHS));
    expect(plain.routes.map((route) => route.name)).toEqual(['events', 'mcp', 'admin']);
    expect(outcome(plain.match('GET', '/sse'))).toEqual({ route: 'admin', params: {} });
  });

  it('uses MCP_PATH as configured', () => {
    const custom = compileRoutes(defaultTables({ mcpPath: '/platform/mcp' }));
    expect(outcome(custom.match('POST', '/platform/mcp'))).toEqual({ route: 'mcp', params: {} });
    expect(outcome(custom.match('POST', '/mcp'))).toEqual({ route: 'admin', params: {} });
  });
});

describe('compileRoutes: operator tables', () => {
  it.each([
    { description: 'a public asset route matches its root', method: 'GET', path: '/assets', expected: { route: 'assets', params: {} } },
    { description: 'a public asset route matches deep paths', method: 'GET', path: '/assets/js/app.js', expected: { route: 'assets', params: {} } },
    { description: 'HEAD when listed', method: 'HEAD', path: '/assets/a.css', expected: { route: 'assets', params: {} } },
    { description: 'another method on a public path is a 405', method: 'POST', path: '/assets/a.css', expected: { method_not_allowed: ['GET', 'HEAD'], route: 'assets' } },
    { description: 'a path merely starting like the prefix is not under it', method: 'GET', path: '/assetsx/a.css', expected: { route: 'admin', params: {} } },
  ])('$description: $method $path', ({ method, path, expected }) => {
    const matcher = compileRoutes(tablesFrom({ routes: routesWith({ name: 'assets', path: '/assets/**', methods: ['GET', 'HEAD'], credential: 'none' }) }));
    expect(outcome(matcher.match(method, path))).toEqual(expected);
  });

  it('first match wins: a parameter claims its segment, then a later broader route gets the rest', () => {
    const matcher = compileRoutes(
      tablesFrom({
        routes: routesWith(
          { name: 'report', path: '/reports/{report_id}/pdf', methods: '*', credential: 'none' },
          { name: 'reports', path: '/reports/**', methods: ['GET'], credential: 'none' },
        ),
      }),
    );
    expect(outcome(matcher.match('GET', '/reports/5/pdf'))).toEqual({ route: 'report', params: { report_id: 5 } });
    expect(outcome(matcher.match('GET', '/reports/latest/pdf'))).toEqual({ bad_param: 'report_id', route: 'report' });
    expect(outcome(matcher.match('GET', '/reports/5/csv'))).toEqual({ route: 'reports', params: {} });
    expect(outcome(matcher.match('GET', '/reports'))).toEqual({ route: 'reports', params: {} });
  });

  it('routes with the same path split it by method; other methods are a 405', () => {
    const matcher = compileRoutes(
      tablesFrom({
        routes: routesWith(
          { name: 'status_read', path: '/status/**', methods: ['GET'], credential: 'none' },
          { name: 'status_write', path: '/status/**', methods: ['POST', 'DELETE'], credential: 'admin' },
        ),
      }),
    );
    expect(outcome(matcher.match('GET', '/status/a'))).toEqual({ route: 'status_read', params: {} });
    expect(outcome(matcher.match('POST', '/status/a'))).toEqual({ route: 'status_write', params: {} });
    expect(outcome(matcher.match('PUT', '/status/a'))).toEqual({ method_not_allowed: ['DELETE', 'GET', 'POST'], route: 'status_read' });
  });

  it('a method-split group with a catch-all method takes every other method', () => {
    const matcher = compileRoutes(
      tablesFrom({
        routes: routesWith(
          { name: 'guides_read', path: '/guides/**', methods: ['GET'], credential: 'none' },
          { name: 'guides_other', path: '/guides/**', methods: '*', credential: 'admin' },
        ),
      }),
    );
    expect(outcome(matcher.match('GET', '/guides'))).toEqual({ route: 'guides_read', params: {} });
    expect(outcome(matcher.match('PUT', '/guides'))).toEqual({ route: 'guides_other', params: {} });
  });

  it('several parameters, each a positive integer', () => {
    const matcher = compileRoutes(
      tablesFrom({
        routes: routesWith({
          name: 'agent_call',
          path: '/api/v1/agents/{agent_id}/calls/{call_id}',
          methods: ['GET'],
          credential: 'api_key',
          scope: 'mcp:transcripts',
          agent_param: 'agent_id',
        }),
      }),
    );
    expect(outcome(matcher.match('GET', '/api/v1/agents/3/calls/77'))).toEqual({ route: 'agent_call', params: { agent_id: 3, call_id: 77 } });
    expect(outcome(matcher.match('GET', '/api/v1/agents/3/calls/077'))).toEqual({ bad_param: 'call_id', route: 'agent_call' });
    expect(outcome(matcher.match('POST', '/api/v1/agents/03/calls/7'))).toEqual({ bad_param: 'agent_id', route: 'agent_call' });
    expect(outcome(matcher.match('POST', '/api/v1/agents/3/calls/7'))).toEqual({ method_not_allowed: ['GET'], route: 'agent_call' });
  });

  it('without a catch-all an unmatched path matches nothing (404), and `/` is exact', () => {
    const matcher = compileRoutes(
      tablesFrom({
        routes: {
          scopes: ['events:write'],
          routes: [
            { name: 'home', path: '/', methods: ['GET'], credential: 'none' },
            { name: 'health', path: '/health', methods: ['GET'], credential: 'none' },
          ],
        },
      }),
    );
    expect(outcome(matcher.match('GET', '/'))).toEqual({ route: 'home', params: {} });
    expect(outcome(matcher.match('GET', '/health'))).toEqual({ route: 'health', params: {} });
    expect(outcome(matcher.match('GET', '/healthz'))).toBe('none');
    expect(outcome(matcher.match('GET', '/health/x'))).toBe('none');
    expect(outcome(matcher.match('GET', ''))).toBe('none');
  });
});
