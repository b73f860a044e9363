import type { FastifyInstance, RouteOptions } from 'fastify';
import FindMyWay from 'find-my-way';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set on the generic forwarding routes (forward.ts): what the fast lane may serve in fastify's place. */
    forwarded?: boolean;
  }
}

/**
 * Answers "would fastify hand this request to the generic forwarding route?" without asking
 * fastify: a second find-my-way router (the one fastify routes with, same default options)
 * holds every route fastify registers, fed by fastify's own `onRoute` hook, each marked
 * forwarding or not. So a path the gateway serves itself (`/api/v1/api-keys`, `/docs/…`, an
 * MCP path), under any method, is never taken by the fast lane, and adding an endpoint to
 * fastify keeps the two in step by construction. Create it before any route is registered.
 */
export class ForwardedRoutes {
  readonly #router: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;
  /** Method + url pairs added, so a route fastify registers twice for two reasons is added once. */
  readonly #added = new Set<string>();

  constructor(app: FastifyInstance) {
    // The matching options fastify's own router was given, so the two read every path alike.
    const { caseSensitive, ignoreTrailingSlash, ignoreDuplicateSlashes, maxParamLength, useSemicolonDelimiter, allowUnsafeRegex } = app.initialConfig;
    // (find-my-way reads useSemicolonDelimiter, though its types do not list it.)
    const options = { caseSensitive, ignoreTrailingSlash, ignoreDuplicateSlashes, maxParamLength, useSemicolonDelimiter, allowUnsafeRegex };
    this.#router = FindMyWay(options as FindMyWay.Config<FindMyWay.HTTPVersion.V1>);
    app.addHook('onRoute', (route) => this.#add(route));
  }

  /** Whether `method` on `path` (no query string) reaches the forwarding route. */
  isForwarded(method: string, path: string): boolean {
    const found = this.#router.find(method as FindMyWay.HTTPMethod, path);
    return found !== null && (found.store as RouteMark).forwarded;
  }

  #add(route: RouteOptions & { prefix?: string; routePath?: string }): void {
    const mark: RouteMark = { forwarded: route.config?.forwarded === true };
    // A plugin's `/` under a prefix is served at `/prefix` and `/prefix/` but announced once: both are its own.
    const atPrefix = route.prefix && (route.routePath === '' || route.routePath === '/');
    const urls = atPrefix ? [route.prefix!, `${route.prefix!}/`] : [route.url];
    for (const method of typeof route.method === 'string' ? [route.method] : route.method) {
      for (const url of urls) {
        const key = `${method} ${url}`;
        if (this.#added.has(key)) continue;
        this.#added.add(key);
        this.#router.on(method as FindMyWay.HTTPMethod, url, noop, mark);
      }
    }
  }
}

interface RouteMark {
  forwarded: boolean;
}

function noop(): void {}
