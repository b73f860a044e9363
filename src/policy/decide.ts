import type { Tables } from '../config/tables.ts';
import type { MethodRule } from '../config/tables.ts';
import { ALLOW, deny, type Allow, type Deny } from './denial.ts';

export { ALLOW } from './denial.ts';
import { decideBatch, decideMirrors, decideOrigin, decideProtocolVersion, clip, type McpRequestFacts } from './mcp-request.ts';
import type { ApiKeyPrincipal, PresentedCredential, Principal } from './principal.ts';
import { calledTool, chargesOf, type Charge, type Count, type Counted } from './rate-limits.ts';
import type { CompiledRoute } from './routes.ts';
import { holdsAnyMcpScope, holdsScope, mcpScopeList } from './scopes.ts';

export type { Allow, Deny } from './denial.ts';

/**
 * The credential must be authenticated before the rest can be decided: the pipeline turns it
 * into a principal and asks again. Only ever answered when `principal` was not given.
 */
export interface Authenticate {
  readonly allow: 'authenticate';
}

export type Decision = Allow | Deny | Authenticate | Count;

export interface Licence {
  readonly features: ReadonlySet<string>;
}

export interface DecisionInput {
  readonly route: CompiledRoute;
  readonly params: Readonly<Record<string, number>>;
  /** What the request presents, by its shape: the rules that need no more are decided before any I/O. */
  readonly credential: PresentedCredential;
  /** The authenticated principal of that credential; absent until authentication has run. */
  readonly principal?: Principal | undefined;
  readonly licence: Licence;
  readonly now: Date;
  /**
   * MCP routes: the parsed JSON-RPC body, one element per message (a single message is
   * `[message]`, a batch its elements). Omit when there is no body (GET, DELETE, SSE
   * stream); an empty array is an empty batch and is refused.
   */
  readonly mcpMessages?: readonly unknown[] | undefined;
  /** MCP routes: what the request's headers say (origin, protocol version, mirrors of the body). */
  readonly mcpRequest?: McpRequestFacts | undefined;
  /** The limiter's answer to the charges a first decision asked to count (`Count`); absent until then. */
  readonly counted?: Counted | undefined;
}

export const AUTHENTICATE: Authenticate = Object.freeze({ allow: 'authenticate' });

/**
 * Decides one request from data alone (docs/architecture.md, "One pipeline"): the matched
 * route, the presented credential and its principal, the licence, the clock and, on MCP
 * routes, the JSON-RPC messages and the request's MCP headers. Every rule of the gateway is
 * here, in this order: an MCP request's `Origin`, the credential's presence and type,
 * revocation, expiry, disabling, then (API keys) scope, licensed feature, agent binding and, on MCP
 * routes, the protocol version, the headers that mirror the body and the messages
 * (mcp-request.ts holds the header rules), and last the rate limits (rate-limits.ts).
 * Pure: no I/O, no clock read. Asked before
 * authentication (no `principal`), it refuses what the credential's shape already settles and
 * otherwise answers `AUTHENTICATE`, so a credential of the wrong kind costs no verification.
 * Asked with a principal whose request passes every other rule but is limited, it answers
 * `Count` (the charges); asked again with the limiter's `counted`, it allows or refuses `429
 * rate_limited`. A request refused by any other rule is never counted.
 */
export function decide(input: DecisionInput & { readonly principal: Principal }, tables: Tables): Allow | Deny | Count;
export function decide(input: DecisionInput, tables: Tables): Decision;
export function decide(input: DecisionInput, tables: Tables): Decision {
  const { route, credential, principal } = input;
  if (route.credential === 'none') return ALLOW;
  // Before the credential is verified: a page of another origin gets nowhere, whatever it holds.
  if (input.mcpRequest !== undefined && principal === undefined) {
    const origin = decideOrigin(input.mcpRequest.headers, input.mcpRequest.allowedOrigins);
    if (!origin.allow) return origin;
  }
  if (credential === 'none') return deny('missing_credential', 'This route needs a bearer credential');
  if (credential === 'unknown') return deny('invalid_credential', 'The bearer token is neither an API key nor an admin token');
  if (credential !== route.credential) {
    return deny('wrong_credential_type', route.credential === 'admin' ? 'This route needs an admin session token, not an API key' : 'This route needs an API key, not an admin session token');
  }
  if (principal === undefined) return AUTHENTICATE;
  if (principal.revoked) return principal.kind === 'admin' ? deny('revoked_credential', 'The admin session has ended; log in again') : deny('revoked_credential', 'The API key has been revoked');
  if (principal.expiresAt !== null && principal.expiresAt.getTime() <= input.now.getTime()) {
    return principal.kind === 'admin' ? deny('expired_credential', 'Admin token has expired; log in again') : deny('expired_credential', 'The API key has expired');
  }
  // After expiry, as the record's status reads: a disabled key that has expired is expired.
  if (principal.kind === 'api_key' && principal.disabled) return deny('disabled_credential', 'The API key is disabled');
  if (principal.kind === 'admin') return ALLOW;
  return decideForKey(input, principal, tables);
}

function decideForKey(input: DecisionInput, key: ApiKeyPrincipal, tables: Tables): Decision {
  const decision = decideKeyRules(input, key, tables);
  // An MCP request is counted once, at its exchange (with its messages), not when its credential is.
  if (decision.allow !== true || (input.route.mcp !== undefined && input.mcpRequest?.exchange !== true)) return decision;
  return decideLimits(input, key, tables);
}

function decideKeyRules(input: DecisionInput, key: ApiKeyPrincipal, tables: Tables): Decision {
  const { route, licence } = input;
  if (route.scope !== undefined) {
    if (!holdsScope(key.scopes, route.scope, tables)) return denyScope(route.scope);
    if (route.feature !== undefined && !licence.features.has(route.feature)) return denyFeature(route.feature);
  }
  if (route.agentParam !== undefined && key.agentId !== null && input.params[route.agentParam] !== key.agentId) {
    return deny('agent_mismatch', 'The API key is bound to another agent');
  }
  if (route.mcp !== undefined) {
    if (!holdsAnyMcpScope(key.scopes, tables)) return denyAnyMcp(tables);
    const facts = input.mcpRequest;
    if (facts?.exchange === true) {
      const version = decideProtocolVersion(facts.headers);
      if (!version.allow) return version;
      const batch = decideBatch(facts);
      if (!batch.allow) return batch;
    }
    if (input.mcpMessages !== undefined) {
      // The messages first: a call no scope allows is told so, not sent to list the tools for a header.
      const decision = decideMessages(input.mcpMessages, key, licence, tables);
      return !decision.allow || facts === undefined ? decision : decideMirrors(facts, input.mcpMessages);
    }
    if (facts?.exchange === true) return decideMirrors(facts, undefined);
  }
  return ALLOW;
}

/**
 * The last rule: the key's own limit and the limits of the tools it calls. Nothing to count:
 * allowed. Not counted yet: `Count`. Counted: allowed, or `429 rate_limited` naming the limit,
 * with the seconds until it admits one more (and, for a tool, its first call in the body).
 */
function decideLimits(input: DecisionInput, key: ApiKeyPrincipal, tables: Tables): Allow | Deny | Count {
  const charges = chargesOf(key, input.mcpMessages, tables);
  if (charges.length === 0) return ALLOW;
  // A batch holding more messages, or calling a tool more often, than a limit allows in a whole interval: no wait would let it through.
  const never = charges.find((charge) => charge.times > charge.rule.requests);
  if (never !== undefined) return neverAdmitted(never, input.mcpMessages);
  const counted = input.counted;
  if (counted === undefined) return { allow: 'count', charges };
  if (counted.admitted) return ALLOW;
  const { refused, retryAfter } = counted;
  const { requests, perSeconds } = refused.rule;
  const rule = `${requests} per ${perSeconds} s`;
  if (refused.tool === undefined) return deny('rate_limited', `The API key's rate limit is reached (${rule})`, { retryAfter });
  return naming(deny('rate_limited', `The rate limit of ${refused.tool} for this API key is reached (${rule})`, { retryAfter }), refused.tool, input.mcpMessages);
}

function neverAdmitted(charge: Charge, mcpMessages: readonly unknown[] | undefined): Deny {
  const { requests, perSeconds } = charge.rule;
  const options = { retryAfter: perSeconds };
  if (charge.tool === undefined) {
    const detail = `The batch holds ${charge.times} messages; the API key's rate limit allows ${requests} per ${perSeconds} s`;
    return { ...deny('rate_limited', detail, options), limit: 'key' };
  }
  const detail = `The batch calls ${charge.tool} ${charge.times} times; its rate limit allows ${requests} per ${perSeconds} s`;
  return { ...naming(deny('rate_limited', detail, options), charge.tool, mcpMessages), limit: 'tool' };
}

/** A tool limit's refusal names the first call of that tool in the body. */
function naming(refusal: Deny, tool: string | undefined, mcpMessages: readonly unknown[] | undefined): Deny {
  const messages = mcpMessages ?? [];
  const index = messages.findIndex((message) => calledTool(message) === tool);
  if (index === -1) return refusal;
  const messageId = idOf(messages[index]);
  return messageId === undefined ? { ...refusal, messageIndex: index } : { ...refusal, messageIndex: index, messageId };
}

/** A batch passes only if every message passes; the first refusal names its message. */
function decideMessages(messages: readonly unknown[], key: ApiKeyPrincipal, licence: Licence, tables: Tables): Decision {
  if (messages.length === 0) return deny('validation_failed', 'Empty JSON-RPC batch');
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index];
    const decision = decideMessage(message, key, licence, tables);
    if (!decision.allow) {
      const messageId = idOf(message);
      return messageId === undefined ? { ...decision, messageIndex: index } : { ...decision, messageIndex: index, messageId };
    }
  }
  return ALLOW;
}

function decideMessage(message: unknown, key: ApiKeyPrincipal, licence: Licence, tables: Tables): Decision {
  if (!isPlainObject(message)) return deny('validation_failed', 'A JSON-RPC message must be an object');
  if (!Object.hasOwn(message, 'method')) {
    if (!Object.hasOwn(message, 'result') && !Object.hasOwn(message, 'error')) {
      return deny('validation_failed', 'A JSON-RPC message needs a method, or a result or error');
    }
    return applyRule(tables.mcp.responses, 'JSON-RPC responses', key, licence, tables);
  }
  const method = message.method;
  if (typeof method !== 'string') return deny('validation_failed', 'The JSON-RPC method must be a string');
  if (method === 'tools/call') return decideToolCall(message.params, key, licence, tables);
  const rule = methodRuleOf(method, tables);
  // No scope could ever send it: answered as a tool server answers a method it does not have.
  if (rule === 'deny') return deny('method_not_found', `Method not found: ${clip(method)} is not open through the gateway`);
  return applyRule(rule, `The method ${clip(method)}`, key, licence, tables);
}

function decideToolCall(params: unknown, key: ApiKeyPrincipal, licence: Licence, tables: Tables): Decision {
  if (!isPlainObject(params) || typeof params.name !== 'string') {
    return deny('validation_failed', 'tools/call needs params.name, a string');
  }
  const tool = tables.mcp.tools.get(params.name);
  // As a tool server answers a tool it does not have: no scope could ever call it.
  if (tool === undefined) return deny('unknown_tool', `Unknown tool: ${clip(params.name)}`);
  if (!holdsScope(key.scopes, tool.scope, tables)) return denyScope(tool.scope);
  if (tool.feature !== undefined && !licence.features.has(tool.feature)) return denyFeature(tool.feature);
  const args = params.arguments;
  if (args === undefined) return ALLOW;
  if (!isPlainObject(args)) return deny('validation_failed', 'tools/call params.arguments must be an object');
  if (key.agentId !== null && Object.hasOwn(args, 'agent_id') && !isAgent(args.agent_id, key.agentId)) {
    return deny('agent_mismatch', 'arguments.agent_id names another agent than the key is bound to');
  }
  return ALLOW;
}

function methodRuleOf(method: string, tables: Tables): MethodRule {
  const exact = tables.mcp.methods.get(method);
  if (exact !== undefined) return exact;
  for (const { prefix, rule } of tables.mcp.methodPrefixes) {
    if (method.length > prefix.length && method.startsWith(prefix)) return rule;
  }
  return 'deny';
}

function applyRule(rule: MethodRule, what: string, key: ApiKeyPrincipal, licence: Licence, tables: Tables): Decision {
  if (rule === 'deny') return deny('method_not_allowed_for_key', `${what} is not allowed through the gateway`);
  if (rule === 'any_mcp') {
    return holdsAnyMcpScope(key.scopes, tables) ? ALLOW : denyAnyMcp(tables);
  }
  if (!holdsScope(key.scopes, rule.scope, tables)) return denyScope(rule.scope);
  const feature = tables.mcp.scopes.get(rule.scope)?.feature;
  if (feature !== undefined && !licence.features.has(feature)) return denyFeature(feature);
  return ALLOW;
}

/**
 * A bound key's `arguments.agent_id` must name its own agent: the number itself, or its
 * canonical decimal string. Anything else (`"02"`, `"+2"`, `null`, `2.5`, an object) is a mismatch.
 */
function isAgent(value: unknown, agentId: number): boolean {
  if (typeof value === 'number') return value === agentId;
  return typeof value === 'string' && CANONICAL_INTEGER.test(value) && value === String(agentId);
}

const CANONICAL_INTEGER = /^[1-9][0-9]*$/;

function idOf(message: unknown): string | number | null | undefined {
  if (!isPlainObject(message) || !Object.hasOwn(message, 'id')) return undefined;
  const id = message.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function denyScope(scope: string): Deny {
  return deny('insufficient_scope', `The API key lacks the scope ${scope}`, { scope });
}

/** No MCP scope at all: `scope` lists every MCP scope, any one of which would do. */
function denyAnyMcp(tables: Tables): Deny {
  return deny('insufficient_scope', 'The MCP server needs at least one mcp: scope', { scope: mcpScopeList(tables) });
}

function denyFeature(feature: string): Deny {
  return deny('feature_not_licensed', `The licensed feature ${feature} is not enabled on this deployment`);
}
