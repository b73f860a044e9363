import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OwnEndpoints } from '../../../src/door/own-endpoints.ts';
import { errorHandler } from '../../../src/http/error-handler.ts';
import { methodNotAllowed } from '../../../src/http/method-not-allowed.ts';
import { rawRequest } from '../../support/raw-http.ts';

/** What fastify's router made of a request: the route it ran, `not found` (its 404 handler), or `unrouted` (refused before routing: a bad escape, a parameter too long). */
type Routed = string;

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * The gateway's own endpoints in small, registered as src/http/ registers them: each with its
 * `methodNotAllowed` 405 route, `/docs` + `/docs/*` for GET only (no 405 route: fastify's 404
 * for other methods), and a plugin under a prefix whose `/` route is served at the prefix with
 * and without its slash. `OwnEndpoints` is created before any route, as app.ts creates it.
 * Fastify listens, and every case is sent as raw bytes: `app.inject` resolves dot segments and
 * absolute-form targets before fastify's router sees them, a real socket does not.
 */
async function gatewayLikeApp(): Promise<{ app: FastifyInstance; own: OwnEndpoints; routedBy: (method: string, url: string) => Promise<Routed> }> {
  const app = Fastify({ logger: false });
  const own = new OwnEndpoints(app);
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-routed', request.is404 ? 'not found' : request.routeOptions.url);
    done();
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(async (_request, reply) => reply.code(404).send());
  const answer = async () => '';

  app.post('/api/v1/auth/login', answer);
  methodNotAllowed(app, '/api/v1/auth/login', ['POST']);
  app.get('/api/v1/api-keys', answer);
  app.post('/api/v1/api-keys', answer);
  app.delete('/api/v1/api-keys/:id', answer);
  methodNotAllowed(app, '/api/v1/api-keys', ['GET', 'POST']);
  methodNotAllowed(app, '/api/v1/api-keys/:id', ['DELETE']);
  app.get('/api/v1/openapi.json', answer);
  methodNotAllowed(app, '/api/v1/openapi.json', ['GET']);
  app.get('/docs', answer);
  app.get('/docs/*', answer);
  await app.register(
    async (scope) => {
      scope.get('/', answer);
      methodNotAllowed(scope, '/', ['GET']);
      scope.get('/:id', answer);
    },
    { prefix: '/api/v1/audit-events' },
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;

  return {
    app,
    own,
    routedBy: async (method, url) => {
      const response = await rawRequest(port, `${method} ${url} HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
      if (response.status === 0) throw new Error(`no answer to ${method} ${url}`);
      return response.headers['x-routed'] ?? 'unrouted';
    },
  };
}

const long = 'x'.repeat(150);
const everyMethod = [...METHODS, 'PROPFIND', 'TRACE'];

const GET_ONLY = ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND', 'TRACE'];

/**
 * One own path under every method: its route for the methods fastify registers (405 routes
 * included), fastify's 404 for the others (`notRegistered`); its own whatever the method.
 * `byMethod`: a method routed to another route url (fastify's HEAD route of a prefix's `/`).
 */
function underEveryMethod(
  what: string,
  url: string,
  route: string,
  { notRegistered = ['PROPFIND', 'TRACE'], byMethod = {} }: { notRegistered?: readonly string[]; byMethod?: Record<string, string> } = {},
): Array<[string, string, string, Routed, boolean]> {
  return everyMethod.map((method) => [what, method, url, notRegistered.includes(method) ? 'not found' : (byMethod[method] ?? route), true]);
}

describe('OwnEndpoints: the paths fastify serves itself, by path whatever the method', () => {
  let gateway: Awaited<ReturnType<typeof gatewayLikeApp>>;
  /** Whether fastify's router runs a route for `url` under any method, by url. */
  const anyMethodRoutes = new Map<string, Promise<boolean>>();
  const routedUnderSomeMethod = (url: string): Promise<boolean> => {
    let found = anyMethodRoutes.get(url);
    if (found === undefined) {
      found = Promise.all(METHODS.map((method) => gateway.routedBy(method, url))).then((routes) => routes.some((route) => route !== 'not found' && route !== 'unrouted'));
      anyMethodRoutes.set(url, found);
    }
    return found;
  };

  beforeAll(async () => {
    gateway = await gatewayLikeApp();
  });
  afterAll(async () => {
    await gateway?.app.close();
  });

  // [description, method, request target, what fastify's router makes of it, serves]
  const cases: Array<[string, string, string, Routed, boolean]> = [
    // Own paths under every method: their handler or their 405 route, or fastify's 404 — never forwarded.
    ...underEveryMethod('login', '/api/v1/auth/login', '/api/v1/auth/login'),
    ...underEveryMethod('api-keys', '/api/v1/api-keys', '/api/v1/api-keys'),
    ...underEveryMethod('a key', '/api/v1/api-keys/7', '/api/v1/api-keys/:id'),
    ...underEveryMethod('the OpenAPI document', '/api/v1/openapi.json', '/api/v1/openapi.json'),
    ...underEveryMethod('docs (GET only: no 405 route)', '/docs', '/docs', { notRegistered: GET_ONLY }),
    ...underEveryMethod('a docs asset (GET only)', '/docs/js/scalar.js', '/docs/*', { notRegistered: GET_ONLY }),
    ['a key id the handler will refuse', 'DELETE', '/api/v1/api-keys/abc', '/api/v1/api-keys/:id', true],
    ['a key id of 100 characters (fastify\'s maxParamLength)', 'DELETE', `/api/v1/api-keys/${'1'.repeat(100)}`, '/api/v1/api-keys/:id', true],

    // A plugin's "/" under a prefix: served at the prefix with and without its slash.
    ...underEveryMethod('the prefix', '/api/v1/audit-events', '/api/v1/audit-events'),
    // (Fastify's HEAD route of the GET at the prefix's slash is announced with the slash.)
    ...underEveryMethod('the prefix with its slash', '/api/v1/audit-events/', '/api/v1/audit-events', { byMethod: { HEAD: '/api/v1/audit-events/' } }),
    ['below the prefix', 'GET', '/api/v1/audit-events/9', '/api/v1/audit-events/:id', true],
    ['below the prefix, a method it does not register', 'POST', '/api/v1/audit-events/9', 'not found', true],
    ['the prefix with a query string', 'GET', '/api/v1/audit-events?since=1', '/api/v1/audit-events', true],
    ['the prefix with its slash and a query string', 'GET', '/api/v1/audit-events/?since=1', '/api/v1/audit-events', true],

    // Query strings: the router reads the path only.
    ['a query string', 'GET', '/api/v1/api-keys?limit=5', '/api/v1/api-keys', true],
    ['an empty query string', 'GET', '/api/v1/api-keys?', '/api/v1/api-keys', true],
    ['a query string holding a path', 'DELETE', '/api/v1/api-keys/7?next=/../api/v1/agents/7/events', '/api/v1/api-keys/:id', true],
    ['a query string on docs', 'GET', '/docs?x=%2F', '/docs', true],

    // Encoded variants fastify's router decodes: its own path, so served by fastify.
    ['an encoded letter', 'GET', '/%61pi/v1/api-keys', '/api/v1/api-keys', true],
    ['an encoded dash', 'POST', '/api/v1/api%2Dkeys', '/api/v1/api-keys', true],
    ['an encoded letter in login', 'POST', '/api/v1/auth/%6Cogin', '/api/v1/auth/login', true],
    ['an encoded docs', 'GET', '/%64ocs', '/docs', true],
    ['an encoded digit as a key id', 'DELETE', '/api/v1/api-keys/%31', '/api/v1/api-keys/:id', true],
    ['an encoded prefix', 'GET', '/api/v1/%61udit-events', '/api/v1/audit-events', true],
    ['an encoded slash inside a parameter', 'DELETE', '/api/v1/api-keys/a%2Fb', '/api/v1/api-keys/:id', true],
    // …and those it does not: an encoded slash is no separator to it.
    ['an encoded slash between segments', 'GET', '/api%2Fv1/api-keys', 'not found', false],
    ['an encoded slash before a key id', 'DELETE', '/api/v1/api-keys%2F7', 'not found', false],

    // Trailing slashes.
    ['api-keys with a slash: an empty key id', 'GET', '/api/v1/api-keys/', '/api/v1/api-keys/:id', true],
    ['docs with a slash (docs/*)', 'GET', '/docs/', '/docs/*', true],
    ['login with a slash', 'POST', '/api/v1/auth/login/', 'not found', false],
    ['the OpenAPI document with a slash', 'GET', '/api/v1/openapi.json/', 'not found', false],
    ['a key with a slash', 'DELETE', '/api/v1/api-keys/7/', 'not found', false],
    ['the prefix with two slashes', 'GET', '/api/v1/audit-events//', 'not found', false],

    // Not the gateway's: the door decides and forwards them.
    ['an upstream path', 'POST', '/api/v1/agents/7/events', 'not found', false],
    ['an upstream path with a query string', 'GET', '/api/v1/agents/7/events?since=1&x=%2F', 'not found', false],
    ['the MCP path', 'POST', '/mcp', 'not found', false],
    ['the MCP path with a query string', 'GET', '/mcp?sessionId=1', 'not found', false],
    ['the root', 'GET', '/', 'not found', false],
    ['the root with a query string', 'GET', '/?x=1', 'not found', false],
    ['the asterisk-form', 'OPTIONS', '*', 'not found', false],

    // Near misses.
    ['a dot-dot out of api-keys', 'GET', '/api/v1/api-keys/../x', 'not found', false],
    ['a dot-dot out of a key', 'DELETE', '/api/v1/api-keys/1/../x', 'not found', false],
    ['a longer name than docs', 'GET', '/docsx', 'not found', false],
    ['a longer name than api-keys', 'GET', '/api/v1/api-keysX', 'not found', false],
    ['a longer name than the prefix', 'GET', '/api/v1/audit-eventsX', 'not found', false],
    ['below a key', 'DELETE', '/api/v1/api-keys/1/extra', 'not found', false],
    ['below login', 'POST', '/api/v1/auth/login/x', 'not found', false],
    ['an own path in other case', 'GET', '/API/v1/api-keys', 'not found', false],
    ['a leading double slash', 'GET', '//api/v1/api-keys', 'not found', false],
    ['a double slash inside', 'GET', '/api/v1//api-keys', 'not found', false],
    ['a semicolon after an own path', 'GET', '/api/v1/api-keys;x', 'not found', false],
    ['a malformed escape in a key id (fastify refuses it before routing)', 'DELETE', '/api/v1/api-keys/%zz', 'unrouted', false],
    ['a key id longer than maxParamLength (fastify refuses it before routing)', 'DELETE', `/api/v1/api-keys/${long}`, 'unrouted', false],
    // docs/* takes anything below it, dot segments included: fastify serves it, the door never forwards it.
    ['a dot-dot below docs (docs/* takes it)', 'GET', '/docs/../api/v1/agents/7/events', '/docs/*', true],
    ['an encoded dot-dot below docs (docs/* takes it)', 'GET', '/docs/%2e%2e/api/v1/agents/7/events', '/docs/*', true],
    // Node passes an absolute-form target on as it is; fastify's router reads its path.
    ['an absolute-form own path', 'GET', 'http://gw/api/v1/api-keys', '/api/v1/api-keys', true],
    ['an absolute-form upstream path', 'GET', 'http://gw/api/v1/agents/7/events', 'not found', false],
  ];

  it.each(cases)('%s: %s %s is routed to %s (serves: %s)', async (_what, method, url, route, serves) => {
    expect(await gateway.routedBy(method, url)).toBe(route);
    expect(gateway.own.serves(url)).toBe(serves);
    // The mirror agrees with fastify's own router: its own is exactly what fastify routes under some method.
    expect(await routedUnderSomeMethod(url)).toBe(serves);
  });
});
