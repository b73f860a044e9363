import Fastify, { type FastifyInstance, type HTTPMethods } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { methodNotAllowed } from '../../../src/http/method-not-allowed.ts';
import { FORWARDED_METHODS } from '../../../src/proxy/forward.ts';
import { ForwardedRoutes } from '../../../src/proxy/forwarded-routes.ts';

/** Which route fastify itself ran for a request: its url, or `not found`, and whether it is a forwarding route. */
interface Routed {
  url: string;
  forwarded: boolean;
}

const NOT_FOUND: Routed = { url: 'not found', forwarded: false };

/**
 * The gateway's route layout in small: own endpoints (with their 405 routes, as the gateway
 * registers them), a `/docs` + `/docs/*` pair registered for GET only, an MCP-like exact path
 * for every method, here inside an encapsulated plugin (registerMcpRoutes registers each MCP path so), and the generic
 * forwarding routes `/` and `/*` (as registerForwarding does). Every handler and the 404
 * handler say which route fastify picked, so each case can compare `isForwarded` with
 * fastify's own routing.
 */
async function gatewayLikeApp(): Promise<{ app: FastifyInstance; routes: ForwardedRoutes; routedBy: (method: string, url: string) => Promise<Routed> }> {
  const app = Fastify({ logger: false });
  // Before any route, as app.ts creates it.
  const routes = new ForwardedRoutes(app);
  let routed: Routed | undefined;
  app.addHook('onRequest', (request, _reply, done) => {
    routed = request.is404 ? NOT_FOUND : { url: request.routeOptions.url!, forwarded: request.routeOptions.config.forwarded === true };
    done();
  });
  app.setNotFoundHandler(async (_request, reply) => reply.code(404).send());
  const answer = async () => '';

  app.post('/api/v1/auth/login', answer);
  methodNotAllowed(app, '/api/v1/auth/login', ['POST']);
  app.post('/api/v1/api-keys', answer);
  app.get('/api/v1/api-keys', answer);
  app.delete('/api/v1/api-keys/:id', answer);
  methodNotAllowed(app, '/api/v1/api-keys', ['GET', 'POST']);
  methodNotAllowed(app, '/api/v1/api-keys/:id', ['DELETE']);
  app.get('/docs', answer);
  app.get('/docs/*', answer);
  for (const url of ['/', '/*']) {
    app.route({ method: FORWARDED_METHODS, url, exposeHeadRoute: false, config: { forwarded: true }, handler: answer });
  }
  await app.register(async (scope) => {
    scope.route({ method: scope.supportedMethods, url: '/mcp', exposeHeadRoute: false, handler: answer });
  });
  await app.ready();

  return {
    app,
    routes,
    routedBy: async (method, url) => {
      routed = undefined;
      await app.inject({ method: method as HTTPMethods, url });
      if (routed === undefined) throw new Error(`no onRequest hook ran for ${method} ${url}`);
      return routed;
    },
  };
}

const long = 'x'.repeat(150);
const longAgent = '9'.repeat(120);

describe('ForwardedRoutes: which requests fastify would hand to the generic forwarding route', () => {
  let gateway: Awaited<ReturnType<typeof gatewayLikeApp>>;

  beforeAll(async () => {
    gateway = await gatewayLikeApp();
  });
  afterAll(async () => {
    await gateway?.app.close();
  });

  // [description, method, request target, the route fastify runs, forwarded]
  const cases: Array<[string, string, string, string, boolean]> = [
    // The gateway's own endpoints, under every method: their handler or their 405 route.
    ['login, its method', 'POST', '/api/v1/auth/login', '/api/v1/auth/login', false],
    ['login, another method (its 405 route)', 'GET', '/api/v1/auth/login', '/api/v1/auth/login', false],
    ['login, HEAD (its 405 route)', 'HEAD', '/api/v1/auth/login', '/api/v1/auth/login', false],
    ['api-keys GET', 'GET', '/api/v1/api-keys', '/api/v1/api-keys', false],
    ['api-keys GET with a query string', 'GET', '/api/v1/api-keys?limit=5', '/api/v1/api-keys', false],
    ['api-keys HEAD (fastify\'s HEAD route of the GET)', 'HEAD', '/api/v1/api-keys', '/api/v1/api-keys', false],
    ['api-keys POST', 'POST', '/api/v1/api-keys', '/api/v1/api-keys', false],
    ['api-keys PUT (its 405 route)', 'PUT', '/api/v1/api-keys', '/api/v1/api-keys', false],
    ['api-keys PATCH (its 405 route)', 'PATCH', '/api/v1/api-keys', '/api/v1/api-keys', false],
    ['api-keys DELETE (its 405 route)', 'DELETE', '/api/v1/api-keys', '/api/v1/api-keys', false],
    ['api-keys OPTIONS (its 405 route)', 'OPTIONS', '/api/v1/api-keys', '/api/v1/api-keys', false],
    ['a key DELETE', 'DELETE', '/api/v1/api-keys/7', '/api/v1/api-keys/:id', false],
    ['a key GET (its 405 route)', 'GET', '/api/v1/api-keys/7', '/api/v1/api-keys/:id', false],
    ['a key HEAD (its 405 route)', 'HEAD', '/api/v1/api-keys/7', '/api/v1/api-keys/:id', false],
    ['a key id the handler will refuse', 'DELETE', '/api/v1/api-keys/abc', '/api/v1/api-keys/:id', false],
    ['an empty key id (a trailing slash)', 'GET', '/api/v1/api-keys/', '/api/v1/api-keys/:id', false],
    ['a key id of 100 characters (fastify\'s maxParamLength)', 'DELETE', `/api/v1/api-keys/${'1'.repeat(100)}`, '/api/v1/api-keys/:id', false],
    ['an encoded character the router decodes', 'GET', '/api/v1/api%2Dkeys', '/api/v1/api-keys', false],
    ['the docs page', 'GET', '/docs', '/docs', false],
    ['the docs page, HEAD', 'HEAD', '/docs', '/docs', false],
    ['the docs page with a slash (docs/*)', 'GET', '/docs/', '/docs/*', false],
    ['a docs asset', 'GET', '/docs/js/scalar.js', '/docs/*', false],
    ['a docs asset, HEAD', 'HEAD', '/docs/x', '/docs/*', false],
    ...(['POST', 'GET', 'DELETE', 'PUT', 'PATCH', 'OPTIONS', 'HEAD', 'QUERY', 'TRACE'].map(
      (method): [string, string, string, string, boolean] => [`the MCP path, ${method}`, method, '/mcp', '/mcp', false],
    )),
    ['the MCP path with a query string', 'GET', '/mcp?sessionId=1', '/mcp', false],

    // Everything else the forwarding routes serve.
    ['the root', 'GET', '/', '/', true],
    ['the root, HEAD', 'HEAD', '/', '/', true],
    ['the root, OPTIONS', 'OPTIONS', '/', '/', true],
    ['an upstream path', 'POST', '/api/v1/agents/7/events', '/*', true],
    ['an upstream path with a query string', 'GET', '/api/v1/agents/7/events?since=1&x=%2F', '/*', true],
    ['a longer name than an own path', 'GET', '/api/v1/api-keysX', '/*', true],
    ['below a key', 'GET', '/api/v1/api-keys/1/extra', '/*', true],
    ['below a key, its method', 'DELETE', '/api/v1/api-keys/1/extra', '/*', true],
    ['an own path in other case', 'GET', '/API/v1/api-keys', '/*', true],
    ['a longer name than docs', 'GET', '/docsx', '/*', true],
    ['below the MCP path', 'POST', '/mcp/extra', '/*', true],
    ['a longer name than the MCP path', 'GET', '/mcpx', '/*', true],
    ['a method docs does not register (no 405 route: fastify forwards it)', 'PUT', '/docs', '/*', true],
    ['a method docs/* does not register', 'POST', '/docs/js/scalar.js', '/*', true],
    ['a key id longer than maxParamLength (fastify falls back to /*)', 'DELETE', `/api/v1/api-keys/${long}`, '/*', true],
    ['a path longer than 100 characters with a long parameter', 'POST', `/api/v1/agents/${longAgent}/events/${long}`, '/*', true],

    // Methods nothing is registered for: fastify's 404.
    ['an unknown method on an upstream path', 'PROPFIND', '/api/v1/agents/7/events', 'not found', false],
    ['an unknown method on the root', 'PROPFIND', '/', 'not found', false],
    ['TRACE on an upstream path', 'TRACE', '/api/v1/agents/7/events', 'not found', false],
    ['QUERY on an upstream path', 'QUERY', '/api/v1/agents/7/events', 'not found', false],
  ];

  it.each(cases)('%s: %s %s runs %s (forwarded: %s)', async (_what, method, url, route, forwarded) => {
    const routed = await gateway.routedBy(method, url);
    expect(routed).toEqual({ url: route, forwarded });
    // The fast lane asks with the path only, as parseRequestTarget gives it.
    expect(gateway.routes.isForwarded(method, url.split('?')[0]!)).toBe(routed.forwarded);
  });
});
