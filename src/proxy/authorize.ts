import type { IncomingMessage } from 'node:http';
import type { SessionTokens } from '../admin/sessions.ts';
import { extractBearer, type BearerCredential } from '../credentials/bearer.ts';
import { GatewayError, type ErrorCode } from '../errors/gateway-error.ts';
import { decide, type Decision } from '../policy/decide.ts';
import type { Principal } from '../policy/principal.ts';
import type { CompiledRoute, RouteMatcher } from '../policy/routes.ts';
import type { Tables } from '../config/tables.ts';
import { UNKNOWN_CLAIMANT } from '../limits/probe-gate.ts';
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

/** The authorizer's answer: at once when everything it needs is cached, else once verified. */
export type Authorization = Authorized | Promise<Authorized>;

/**
 * The request path of everything that is forwarded: extract → verify → decide.
 * Throws (or rejects with) a GatewayError for every refusal; returns the principal the upstream
 * will be told of. A cached credential is decided synchronously: no promise, no microtask.
 */
export function createAuthorizer(deps: AuthorizerDeps): (request: IncomingMessage, path?: string) => Authorization {
  const { routes, tables, verifier, sessions, licence, now, observe } = deps;
  if (!observe) return decideRequest;

  return function authorizeObserved(request: IncomingMessage, path?: string): Authorization {
    const started = performance.now();
    let authorization: Authorization;
    try {
      authorization = decideRequest(request, path);
    } catch (error) {
      observeRefusal(request, path, error, started);
      throw error;
    }
    if (!(authorization instanceof Promise)) {
      observeAllowed(authorization, started);
      return authorization;
    }
    return authorization.then(
      (authorized) => {
        observeAllowed(authorized, started);
        return authorized;
      },
      (error: unknown) => {
        observeRefusal(request, path, error, started);
        throw error;
      },
    );
  };

  function observeAllowed(authorized: Authorized, started: number): void {
    observe!({ allowed: true, code: undefined, credential: credentialKindOf(authorized.principal), route: authorized.route.name, seconds: (performance.now() - started) / 1000 });
  }

  function observeRefusal(request: IncomingMessage, checkedPath: string | undefined, error: unknown, started: number): void {
    const code = error instanceof GatewayError ? error.code : 'internal_error';
    observe!({ allowed: false, code, credential: presentedCredentialKind(request), route: routeNameOf(request, checkedPath), seconds: (performance.now() - started) / 1000 });
  }

  function routeNameOf(request: IncomingMessage, checkedPath: string | undefined): string | undefined {
    try {
      return routes.match(request.method ?? 'GET', checkedPath ?? parseRequestTarget(request.url ?? '').path)?.route.name;
    } catch {
      return undefined;
    }
  }

  /** `checkedPath`: the request target's path, when the caller has already parsed it (the fast lane). */
  function decideRequest(request: IncomingMessage, checkedPath?: string): Authorization {
    const path = checkedPath ?? parseRequestTarget(request.url ?? '').path;
    const match = routes.match(request.method ?? 'GET', path);
    if (!match) throw noRouteMatches();
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
    if (route.credential === 'none') return decideFor(route, params, null);
    const principal = principalOf(credential, route.credential, request);
    return principal instanceof Promise ? principal.then((verified) => decideFor(route, params, verified)) : decideFor(route, params, principal);
  }

  function decideFor(route: CompiledRoute, params: Readonly<Record<string, number>>, principal: Principal | null): Authorized {
    const decision: Decision = decide({ route, params, principal, licence, now: now() }, tables);
    if (!decision.allow) {
      throw new GatewayError(decision.code, decision.detail, decision.scope === undefined ? {} : { scope: decision.scope });
    }
    return { route, principal };
  }

  /**
   * Verifies the credential the route expects; the other kind is refused by its shape, with no I/O.
   * An uncached key is verified on behalf of the client's address: a throttled prefix's one verify
   * a second goes round the addresses asking (docs/security.md, "Guesses behind a real key's prefix").
   */
  function principalOf(credential: BearerCredential, expected: 'api_key' | 'admin', request: IncomingMessage): Principal | null | Promise<Principal> {
    switch (credential.kind) {
      case 'none':
        return null;
      case 'unknown':
        throw new GatewayError('invalid_credential', 'The bearer token is neither an API key nor an admin token');
      case 'api_key':
        if (expected !== 'api_key') throw new GatewayError('wrong_credential_type', 'This route needs an admin session token, not an API key');
        return verifier.tryVerifyCached(credential.token) ?? verifier.verify(credential.token, request.socket.remoteAddress ?? UNKNOWN_CLAIMANT);
      case 'jwt':
        if (expected !== 'admin') throw new GatewayError('wrong_credential_type', 'This route needs an API key, not an admin session token');
        return sessions.verifyCached(credential.token) ?? sessions.verify(credential.token);
    }
  }
}

/** The refusal of a request target that no route of the table matches. */
export function noRouteMatches(): GatewayError {
  return new GatewayError('not_found', 'No route matches this request');
}

/** The kind of credential a refused request presented, by its shape, for the decision metrics. */
export function presentedCredentialKind(request: IncomingMessage): ObservedDecision['credential'] {
  try {
    const bearer = extractBearer(request.headers.authorization).kind;
    return bearer === 'api_key' ? 'api_key' : bearer === 'jwt' ? 'admin' : 'none';
  } catch {
    // A malformed Authorization header is counted as none.
    return 'none';
  }
}

function credentialKindOf(principal: Principal | null): 'api_key' | 'admin' | 'none' {
  return principal === null ? 'none' : principal.kind;
}
