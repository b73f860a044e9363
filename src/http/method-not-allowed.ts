import type { FastifyInstance, HTTPMethods } from 'fastify';
import { GatewayError } from '../errors/gateway-error.ts';

const ALL_METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** The gateway's own paths are never forwarded: other methods on them get 405 with `Allow`. */
export function methodNotAllowed(app: FastifyInstance, url: string, allowed: HTTPMethods[]): void {
  const others = ALL_METHODS.filter((method) => !allowed.includes(method) && !(method === 'HEAD' && allowed.includes('GET')));
  app.route({
    method: others,
    url,
    handler: async () => {
      throw new GatewayError('method_not_allowed', `Use ${allowed.join(' or ')} on ${url}`, { allow: allowed });
    },
  });
}
