import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { FAVICON_PATH, registerFavicon } from '../../../src/http/favicon.ts';
import { defaultTables } from '../policy/support.ts';

describe('registerFavicon', () => {
  it('answers GET and HEAD /favicon.ico 404 with a problem, itself', async () => {
    const app = Fastify();
    registerFavicon(app, defaultTables());
    for (const method of ['GET', 'HEAD'] as const) {
      const answer = await app.inject({ method, url: FAVICON_PATH });
      expect(answer.statusCode).toBe(404);
      expect(answer.headers['content-type']).toContain('application/problem+json');
    }
    expect((await app.inject(FAVICON_PATH)).json()).toMatchObject({ code: 'not_found', status: 404 });
    await app.close();
  });

  it('leaves the path to the route table when a route names it', async () => {
    const tables = defaultTables();
    const app = Fastify();
    registerFavicon(app, { routes: [{ ...tables.routes[0]!, name: 'icon', path: FAVICON_PATH }, ...tables.routes] });
    expect(app.hasRoute({ method: 'GET', url: FAVICON_PATH })).toBe(false);
    await app.close();
  });
});
