import type { IncomingMessage } from 'node:http';
import type { Tables } from '../config/tables.ts';
import { extractBearer, type BearerCredential } from '../credentials/bearer.ts';
import { GatewayError, type ErrorCode } from '../errors/gateway-error.ts';
import { UNKNOWN_CLAIMANT } from '../limits/probe-gate.ts';
import type { RateLimiter } from '../limits/rate-limiter.ts';
import { decide, type DecisionInput, type Licence } from '../policy/decide.ts';
import { deny, type Allow, type Deny } from '../policy/denial.ts';
import type { McpHeaders, ToolHeaderLookup } from '../policy/mcp-headers.ts';
import type { McpRequestFacts } from '../policy/mcp-request.ts';
import type { AdminPrincipal, Principal } from '../policy/principal.ts';
import { keyChargeOf, type Charge, type Counted, type LimitKind, type Quota } from '../policy/rate-limits.ts';
import type { CompiledRoute, RouteMatch, RouteMatcher } from '../policy/routes.ts';
import { mcpHeadersOf } from './mcp-headers-of.ts';
import { presentedKindOf, type Authenticable, type Authentication, type Authenticator } from './authenticate.ts';

/** The methods forwarded; any other is a 404 like an unknown endpoint, on every path the gateway does not serve itself. */
export const FORWARDED_METHODS: ReadonlySet<string> = new Set(['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS']);

/** An allowed request: what the rewrite needs to build what the upstream receives. */
export interface Authorized {
  readonly allow: true;
  readonly route: CompiledRoute;
  readonly params: Readonly<Record<string, number>>;
  readonly principal: Principal | null;
  /** MCP routes: the request's MCP headers, read once for every rule that needs them. */
  readonly mcpHeaders?: McpHeaders;
  /**
   * The rate limits the request was counted against, for the `RateLimit` headers of its answer;
   * on an MCP path (counted at its exchange), the key's own limit as it stands.
   */
  readonly quotas?: readonly Quota[];
}

/**
 * A refusal, with the state of the key's rate limits when it has any (its answer carries them
 * too), and for its log line the route that decided it and the key the credential proved.
 */
export type Refusal = Deny & { readonly quotas?: readonly Quota[]; readonly routeName?: string; readonly keyId?: number };

export type Verdict = Authorized | Refusal;

/** An MCP exchange's decision: allowed or refused, with the rate limits it was counted against. */
export type Settled = (Allow | Deny) & { readonly quotas?: readonly Quota[] };

/**
 * An exchange every rule allows but its rate limits, which are counted last (`countExchange`),
 * once nothing else can refuse it (its MCP session).
 */
export interface Uncounted {
  readonly allow: 'count';
  readonly input: DecisionInput & { readonly principal: Principal };
  readonly charges: readonly Charge[];
}

/** At once when everything the decision needs is cached; else once the credential is authenticated. Rejects only on failure. */
export type Authorization = Verdict | Promise<Verdict>;

export interface ObservedDecision {
  allowed: boolean;
  /** The stable code of a refusal; `internal_error` for a failure. */
  code: ErrorCode | undefined;
  credential: 'api_key' | 'admin' | 'none';
  route: string | undefined;
  seconds: number;
}

export interface PipelineDeps {
  routes: RouteMatcher;
  tables: Tables;
  authenticator: Pick<Authenticator, 'authenticate'>;
  licence: Licence;
  now: () => Date;
  /** Counts the requests of keys and tools with a rate limit (`decide()` names what to count). */
  limiter: RateLimiter;
  /** Told of every request refused by a rate limit, and which (the rate-limit metric). */
  rateLimited?: (limit: LimitKind) => void;
  /** Told of every key a decision accepted as a credential (write-behind `last_used_at`). */
  usage?: { record(keyId: number, at: number): void };
  /** Told of every decision, allowed or refused (the decision metrics). */
  observe?: (decision: ObservedDecision) => void;
  /** MCP routes: the origins a browser page may call from (`MCP_ALLOWED_ORIGINS`), and the tools' mirrored parameters. */
  mcp?: McpPolicy;
}

export interface McpPolicy {
  readonly allowedOrigins: ReadonlySet<string>;
  readonly toolHeaders: ToolHeaderLookup;
}

const NO_MCP_POLICY: McpPolicy = Object.freeze({ allowedOrigins: new Set<string>(), toolHeaders: { paramHeadersOf: () => undefined } });

/**
 * The route the gateway's own admin endpoints are decided as: an admin session token, nothing
 * else (docs/api-keys.md). Not in the route table: those paths are served, never forwarded.
 */
const OWN_ADMIN_ENDPOINTS: CompiledRoute = Object.freeze({
  name: 'admin_api',
  path: '/api/v1/**',
  methods: '*',
  credential: 'admin',
  scope: undefined,
  feature: undefined,
  agentParam: undefined,
  mcp: undefined,
});
const NO_PARAMS: Readonly<Record<string, number>> = Object.freeze({});

/**
 * The one pipeline every request is decided by (docs/architecture.md, "One pipeline"):
 * the route table's match, then `decide()` on what the credential's shape settles, then
 * `authenticate`, then `decide()` on the principal. Every refusal is a value (`Deny`); only
 * infrastructure failures throw. The rewrite (what the upstream receives) follows in the
 * transport that forwards. Adding a rule means changing `decide()`, nothing here.
 */
export class RequestPipeline {
  readonly #deps: PipelineDeps;

  constructor(deps: PipelineDeps) {
    this.#deps = deps;
  }

  /**
   * Decides a request whose path (the request target's, checked) is not the gateway's own.
   * `observed` false: the caller tells `observe` itself, once it has decided the rest (MCP messages).
   */
  authorize(request: IncomingMessage, path: string, observed = true): Authorization {
    const started = !observed || this.#deps.observe === undefined ? -1 : performance.now();
    const method = request.method!;
    const match = FORWARDED_METHODS.has(method) ? this.#deps.routes.match(method, path) : undefined;
    if (match === undefined || match.error !== undefined) return this.#observed(routeRefusal(match), match?.route, request, started);
    const mcp = match.route.mcp === undefined ? undefined : this.#mcpFacts(request, false);
    const verdict = this.#decide(match.route, match.params, extractBearer(request.headers.authorization), request.socket.remoteAddress, mcp);
    if (!(verdict instanceof Promise)) return this.#observed(verdict, match.route, request, started);
    return verdict.then(
      (settled) => this.#observed(settled, match.route, request, started),
      (error: unknown) => {
        if (started >= 0) this.observe(request, match.route.name, { allowed: false, code: error instanceof GatewayError ? error.code : 'internal_error' }, started);
        throw error;
      },
    );
  }

  /**
   * An MCP exchange, decided for the principal its credential was already allowed as: its
   * headers (protocol version, and with a body the headers that mirror it) and its messages.
   */
  decideExchange(authorized: Authorized, request: IncomingMessage, messages?: readonly unknown[], batch = false): Settled | Uncounted {
    const { route, params, principal } = authorized;
    const { licence, now } = this.#deps;
    const mcpRequest = { ...this.#mcpFacts(request, true, authorized.mcpHeaders), batch };
    return this.#decideOnce({ route, params, credential: principal!.kind, principal: principal!, licence, now: now(), mcpMessages: messages, mcpRequest });
  }

  /** Counts an exchange's rate limits, and decides it on what was counted. */
  countExchange(uncounted: Uncounted): Settled | Promise<Settled> {
    return this.#count(uncounted);
  }

  #mcpFacts(request: IncomingMessage, exchange: boolean, headers?: McpHeaders): McpRequestFacts {
    const { allowedOrigins, toolHeaders } = this.#deps.mcp ?? NO_MCP_POLICY;
    return { headers: headers ?? mcpHeadersOf(request), allowedOrigins, toolHeaders, exchange };
  }

  /** The admin guard of the gateway's own endpoints: the same decision, as a route needing an admin token. */
  async authorizeAdmin(request: IncomingMessage): Promise<AdminPrincipal | Deny> {
    const verdict = await this.#decide(OWN_ADMIN_ENDPOINTS, NO_PARAMS, extractBearer(request.headers.authorization), request.socket.remoteAddress);
    return verdict.allow ? (verdict.principal as AdminPrincipal) : verdict;
  }

  /**
   * Tells `observe` how a decision ended, once: the route-table name, and the kind of credential
   * (`credential`, when the caller knows it; else read from the request's shape).
   */
  observe(
    request: IncomingMessage,
    route: string | undefined,
    outcome: { allowed: boolean; code: ErrorCode | undefined },
    started: number,
    credential: ObservedDecision['credential'] = credentialKindOf(extractBearer(request.headers.authorization)),
  ): void {
    this.#deps.observe?.({ ...outcome, credential, route, seconds: (performance.now() - started) / 1000 });
  }

  #decide(
    route: CompiledRoute,
    params: Readonly<Record<string, number>>,
    bearer: BearerCredential,
    address: string | undefined,
    mcpRequest?: McpRequestFacts,
  ): Verdict | Promise<Verdict> {
    const { licence, now, tables } = this.#deps;
    if (bearer.kind === 'malformed') return deny(bearer.code, bearer.detail);
    const at = now();
    const first = decide({ route, params, credential: presentedKindOf(bearer), licence, now: at, mcpRequest }, tables);
    if (first.allow === true) return { allow: true, route, params, principal: null };
    if (first.allow === false) return first;
    const authentication: Authentication = this.#deps.authenticator.authenticate(bearer as Authenticable, address ?? UNKNOWN_CLAIMANT);
    // Decided against the clock as it is once the credential is authenticated.
    if (authentication instanceof Promise) return authentication.then((principal) => this.#decideFor(route, params, principal, now(), mcpRequest));
    return this.#decideFor(route, params, authentication, at, mcpRequest);
  }

  #decideFor(
    route: CompiledRoute,
    params: Readonly<Record<string, number>>,
    principal: Principal | Deny,
    at: Date,
    mcpRequest: McpRequestFacts | undefined,
  ): Verdict | Promise<Verdict> {
    if ('allow' in principal) return principal;
    const settled = this.#settle({ route, params, credential: principal.kind, principal, licence: this.#deps.licence, now: at, mcpRequest }, this.#deps.usage);
    const verdict = (decision: Settled): Verdict => {
      if (!decision.allow) return principal.kind === 'api_key' ? { ...decision, keyId: principal.keyId } : decision;
      const quotas = decision.quotas;
      if (mcpRequest === undefined) return quotas === undefined ? { allow: true, route, params, principal } : { allow: true, route, params, principal, quotas };
      // An MCP request is counted at its exchange; until then, a refusal of its method or body tells the key's limit as it stands.
      const standing = principal.kind === 'api_key' ? keyChargeOf(principal) : undefined;
      const mcpHeaders = mcpRequest.headers;
      return standing === undefined ? { allow: true, route, params, principal, mcpHeaders } : { allow: true, route, params, principal, mcpHeaders, quotas: [this.#deps.limiter.peek(standing)] };
    };
    return settled instanceof Promise ? settled.then(verdict) : verdict(settled);
  }

  /** `decide()` on a principal, and when it asks to count (the request is limited), the count. */
  #settle(input: DecisionInput & { readonly principal: Principal }, usage?: PipelineDeps['usage']): Settled | Promise<Settled> {
    const decision = this.#decideOnce(input, usage);
    return decision.allow === 'count' ? this.#count(decision) : decision;
  }

  /**
   * `decide()` on a principal: allowed, refused, or to be counted. A refusal of a key with a
   * limit of its own carries that limit's state, counted or not. `usage`: told of a key the
   * decision accepted as a credential (allowed, refused 403 or 429; not a revoked or expired key).
   */
  #decideOnce(input: DecisionInput & { readonly principal: Principal }, usage?: PipelineDeps['usage']): Settled | Uncounted {
    const { tables, limiter } = this.#deps;
    const decision = decide(input, tables);
    const { principal } = input;
    if (usage !== undefined && principal.kind === 'api_key' && (decision.allow !== false || decision.status !== 401)) usage.record(principal.keyId, input.now.getTime());
    if (decision.allow === true) return decision;
    if (decision.allow === false) {
      // Refused by a limit before anything was counted: a batch larger than a whole limit.
      if (decision.limit !== undefined) this.#deps.rateLimited?.(decision.limit);
      const charge = principal.kind === 'api_key' ? keyChargeOf(principal) : undefined;
      return charge === undefined ? decision : { ...decision, quotas: [limiter.peek(charge)] };
    }
    return { allow: 'count', input, charges: decision.charges };
  }

  /** The limiter's count of the charges, and `decide()` again on what it counted. */
  #count({ input, charges }: Uncounted): Settled | Promise<Settled> {
    const counted = this.#deps.limiter.take(charges);
    return counted instanceof Promise ? counted.then((settled) => this.#afterCount(input, settled)) : this.#afterCount(input, counted);
  }

  #afterCount(input: DecisionInput, counted: Counted): Settled {
    if (!counted.admitted) this.#deps.rateLimited?.(counted.refused.limit);
    const decision = decide({ ...input, counted }, this.#deps.tables);
    if (decision.allow === 'count' || decision.allow === 'authenticate') throw new Error('decide() asked again once the charges were counted');
    return decision.allow ? { allow: true, quotas: counted.quotas } : { ...decision, quotas: counted.quotas };
  }

  #observed(decided: Verdict, route: CompiledRoute | undefined, request: IncomingMessage, started: number): Verdict {
    const verdict = decided.allow || route === undefined ? decided : { ...decided, routeName: route.name };
    if (started < 0 || this.#deps.observe === undefined) return verdict;
    if (verdict.allow) {
      const credential = verdict.principal === null ? 'none' : verdict.principal.kind;
      this.#deps.observe({ allowed: true, code: undefined, credential, route: verdict.route.name, seconds: (performance.now() - started) / 1000 });
    } else {
      this.observe(request, route?.name, { allowed: false, code: verdict.code }, started);
    }
    return verdict;
  }
}

/** The refusal of a request target the route table does not serve as it is. */
function routeRefusal(match: Exclude<RouteMatch, { error?: undefined }> | undefined): Deny {
  if (match === undefined) return deny('not_found', 'No route matches this request');
  if (match.error === 'bad_param') {
    const message = 'must be a positive decimal integer without sign or leading zeros';
    return deny('validation_failed', `The path parameter ${match.param} ${message}`, { errors: [{ field: match.param, message }] });
  }
  return deny('method_not_allowed', `Use ${match.allow.join(' or ')} on this path`, { allowedMethods: match.allow });
}

function credentialKindOf(bearer: BearerCredential): ObservedDecision['credential'] {
  return bearer.kind === 'api_key' ? 'api_key' : bearer.kind === 'jwt' ? 'admin' : 'none';
}
