import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { FORWARDED_METHODS } from '../../../src/proxy/forward.ts';
import { ForwardedRoutes } from '../../../src/proxy/forwarded-routes.ts';

// Regression: for a route '/' inside a plugin registered with a prefix, fastify adds both
// '/pre' and '/pre/' to its router, but runs onRoute hooks only for '/pre' (route.js,
// addNewRoute with prefixing: true). ForwardedRoutes once never learnt of '/pre/' and answered
// "forwarded" for a path fastify serves itself: a cached admin token would have had that own
// endpoint proxied upstream by the fast lane.
describe('ForwardedRoutes and a prefixed plugin\'s "/" route', () => {
  it.each([
    ['the prefix', 'GET', '/pre'],
    ['the prefix with its slash', 'GET', '/pre/'],
  ])('%s: %s %s is served by the plugin, not forwarded', async (_what, method, url) => {
    const app = Fastify({ logger: false });
    const routes = new ForwardedRoutes(app);
    let ran = '';
    await app.register(async (scope) => {
      scope.get('/', async () => {
        ran = 'plugin';
        return '';
      });
    }, { prefix: '/pre' });
    for (const path of ['/', '/*']) {
      app.route({ method: FORWARDED_METHODS, url: path, exposeHeadRoute: false, config: { forwarded: true }, handler: async () => { ran = 'forward'; return ''; } });
    }
    await app.ready();
    await app.inject({ method: 'GET', url });
    expect(ran).toBe('plugin');
    expect(routes.isForwarded(method, url)).toBe(false);
    await app.close();
  });
});
