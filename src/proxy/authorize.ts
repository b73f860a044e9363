import type { FastifyRequest } from 'fastify';
import type { SessionTokens } from '../admin/sessions.ts';
import { extractBearer, type BearerCredential } from '../credentials/bearer.ts';
import { GatewayError, type ErrorCode } from '../http/errors.ts';
import { decide, type Decision } from '../policy/decide.ts';
import type { Principal } from '../policy/principal.ts';
import type { CompiledRoute, RouteMatcher } from '../policy/routes.ts';
import type { Tables } from '../config/tables.ts';
import type { KeyVerifier } from '../verify/key-verifier.ts';
import { parseRequestTarget } from './request-target.ts';

export interface AuthorizerDeps {
  routes: RouteMatcher;
  tables: Tables;
  verifier: KeyVerifier;
  sessions: SessionTokens;
  licence: { features: ReadonlySet<string> };
  now: () => Date;
  /** Told of every decision, allowed or refused (metrics); `route` is the route-table name or undefined. */
  observe?: (decision: ObservedDecision) => void;
}

export interface ObservedDecision {
  allowed: boolean;
  /** The stable code of a refusal. */
  code: ErrorCode | undefined;
  credential: 'api_key' | 'admin' | 'none';
  route: string | undefined;
  seconds: number;
}

export interface Authorized {
  route: CompiledRoute;
  principal: Principal | null;
}

/**
 * The request path of everything that is forwarded: extract → verify → decide.
 * Throws a GatewayError for every refusal; returns the principal the upstream will be told of.
 */
export function createAuthorizer(deps: AuthorizerDeps) {
  const { routes, tables, verifier, sessions, licence, now, observe } = deps;
  if (!observe) return decideRequest;

  return async function authorizeObserved(request: FastifyRequest): Promise<Authorized> {
    const started = performance.now();
    try {
      const authorized = await decideRequest(request);
      observe({ allowed: true, code: undefined, credential: credentialKindOf(authorized.principal), route: authorized.route.name, seconds: (performance.now() - started) / 1000 });
      return authorized;
    } catch (error) {
      const code = error instanceof GatewayError ? error.code : 'internal_error';
      const bearer = extractBearer(request.headers.authorization).kind;
      const credential = bearer === 'api_key' ? 'api_key' : bearer === 'jwt' ? 'admin' : 'none';
      observe({ allowed: false, code, credential, route: routeNameOf(request), seconds: (performance.now() - started) / 1000 });
      throw error;
    }
  };

  function routeNameOf(request: FastifyRequest): string | undefined {
    try {
      return routes.match(request.raw.method ?? 'GET', parseRequestTarget(request.raw.url ?? '').path)?.route.name;
    } catch {
      return undefined;
    }
  }

  async function decideRequest(request: FastifyRequest): Promise<Authorized> {
    const { path } = parseRequestTarget(request.raw.url ?? '');
    const match = routes.match(request.raw.method ?? 'GET', path);
    if (!match) throw new GatewayError('not_found', 'No route matches this request');
    if (match.error === 'bad_param') {
      throw new GatewayError('validation_failed', `The path parameter ${match.param} must be a positive decimal integer without sign or leading zeros`, {
        errors: [{ field: match.param, message: 'must be a positive decimal integer without sign or leading zeros' }],
      });
    }
    if (match.error === 'method_not_allowed') {
      throw new GatewayError('method_not_allowed', `Use ${match.allow.join(' or ')} on this path`, { allow: match.allow });
    }
    const { route, params } = match;
    const credential = extractBearer(request.headers.authorization);
    const principal = route.credential === 'none' ? null : await principalOf(credential, route.credential);
    const decision: Decision = decide({ route, params, principal, licence, now: now() }, tables);
    if (!decision.allow) {
      throw new GatewayError(decision.code, decision.detail, decision.scope === undefined ? {} : { scope: decision.scope });
    }
    return { route, principal };
  }

  /** Verifies the credential the route expects; the other kind is refused by its shape, with no I/O. */
  async function principalOf(credential: BearerCredential, expected: 'api_key' | 'admin'): Promise<Principal | null> {
    switch (credential.kind) {
      case 'none':
        return null;
      case 'unknown':
        throw new GatewayError('invalid_credential', 'The bearer token is neither an API key nor an admin token');
      case 'api_key':
        if (expected !== 'api_key') throw new GatewayError('wrong_credential_type', 'This route needs an admin session token, not an API key');
        return verifier.tryVerifyCached(credential.token) ?? (await verifier.verify(credential.token));
      case 'jwt':
        if (expected !== 'admin') throw new GatewayError('wrong_credential_type', 'This route needs an API key, not an admin session token');
        return { kind: 'admin', adminId: (await sessions.verify(credential.token)).adminId };
    }
  }
}

function credentialKindOf(principal: Principal | null): 'api_key' | 'admin' | 'none' {
  return principal === null ? 'none' : principal.kind;
}
