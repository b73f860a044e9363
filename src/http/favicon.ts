import type { FastifyInstance } from 'fastify';
import type { Tables } from '../config/tables.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { problemFor } from './problem.ts';

export const FAVICON_PATH = '/favicon.ico';

/**
 * Browsers ask every site for `/favicon.ico` on their own, with no credential: forwarded to the
 * admin catch-all, each would be a `401` and a `request refused` line about nothing an operator
 * did. The gateway answers it `404` itself, with no line and nothing forwarded
 * (docs/monitoring.md, "Log lines") — unless the route table names that path, so that the
 * platform's own icon can be served through a public route.
 */
export function registerFavicon(app: FastifyInstance, tables: Pick<Tables, 'routes'>): void {
  if (tables.routes.some((route) => route.path === FAVICON_PATH)) return;
  const problem = problemFor(new GatewayError('not_found', 'The gateway has no icon; add a route for /favicon.ico to serve the platform\'s'));
  app.route({
    method: ['GET', 'HEAD'],
    url: FAVICON_PATH,
    handler: async (request, reply) => reply.code(problem.status).headers(problem.headers).send({ ...problem.body, instance: request.id }),
  });
}
