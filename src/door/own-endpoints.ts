import type { FastifyInstance, RouteOptions } from 'fastify';
import FindMyWay from 'find-my-way';

/**
 * Answers "is this path one of the gateway's own endpoints?" without asking fastify: a second
 * find-my-way router (the one fastify routes with, given the same options, so both read every
 * path alike) holds every path fastify registers, fed by fastify's own `onRoute` hook, under
 * one method whatever theirs: fastify answers every method on its own paths (405 with `Allow`,
 * or 404), and none of them is ever forwarded. Adding an endpoint to fastify keeps the two in
 * step by construction. Create it before any route is registered.
 */
export class OwnEndpoints {
  readonly #router: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;
  /** Paths added, so a path fastify registers for several methods or reasons is added once. */
  readonly #added = new Set<string>();

  constructor(app: FastifyInstance) {
    const { caseSensitive, ignoreTrailingSlash, ignoreDuplicateSlashes, maxParamLength, useSemicolonDelimiter, allowUnsafeRegex } = app.initialConfig;
    // (find-my-way reads useSemicolonDelimiter, though its types do not list it.)
    const options = { caseSensitive, ignoreTrailingSlash, ignoreDuplicateSlashes, maxParamLength, useSemicolonDelimiter, allowUnsafeRegex };
    this.#router = FindMyWay(options as FindMyWay.Config<FindMyWay.HTTPVersion.V1>);
    app.addHook('onRoute', (route) => this.#add(route));
  }

  /** Whether fastify serves `url` (the request target, query string and all, as fastify's router reads it). */
  serves(url: string): boolean {
    return this.#router.find('GET', url) !== null;
  }

  #add(route: RouteOptions & { prefix?: string; routePath?: string }): void {
    // A plugin's `/` under a prefix is served at `/prefix` and `/prefix/` but announced once: both are its own.
    const atPrefix = route.prefix && (route.routePath === '' || route.routePath === '/');
    for (const url of atPrefix ? [route.prefix!, `${route.prefix!}/`] : [route.url]) {
      if (this.#added.has(url)) continue;
      this.#added.add(url);
      this.#router.on('GET', url, noop);
    }
  }
}

function noop(): void {}
