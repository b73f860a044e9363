import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { McpTransport } from '../config/tables.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { parseRequestTarget } from '../proxy/request-target.ts';
import type { Exchange, ExchangeReplies, ExchangeStep } from './mcp-exchange.ts';
import type { SessionBindings } from './session-bindings.ts';
import { isSessionId, legacyBinding, legacySessionIdOfEndpoint, legacySessionIdOfQuery, presentedSessionId, streamableBinding } from './session-ids.ts';

/** The binding key of the session a request presents; undefined when it presents none. Throws a refusal for an ambiguous one. */
export function sessionOf(request: IncomingMessage, transport: McpTransport): string | undefined {
  if (transport === 'streamable') {
    const id = presentedSessionId(request.rawHeaders);
    return id === undefined ? undefined : streamableBinding(id);
  }
  if (transport === 'messages') return legacyBinding(legacySessionIdOfQuery(parseRequestTarget(request.url ?? '').search));
  return undefined;
}

/**
 * Sessions bound to the key that opened them (docs/mcp.md, "Sessions"): the session a request
 * presents is checked before it is forwarded, a session the upstream issues is bound to the
 * key, one it ends is unbound, and an open stream keeps its session bound.
 */
export class SessionGate {
  readonly #bindings: SessionBindings;
  readonly #replies: ExchangeReplies;
  readonly #refreshMs: number;

  constructor(bindings: SessionBindings, replies: ExchangeReplies, refreshMs: number) {
    this.#bindings = bindings;
    this.#replies = replies;
    this.#refreshMs = refreshMs;
  }

  /** The session the request presents must be bound to its key; then it is forwarded. */
  check(exchange: Exchange, forward: ExchangeStep): void {
    const session = sessionOf(exchange.request, exchange.transport);
    if (session === undefined) {
      forward(exchange);
      return;
    }
    exchange.session = session;
    const replies = this.#replies;
    this.#bindings.check(session, exchange.principal.keyId).then(
      (owner) => {
        if (owner === 'other_key') replies.refuse(exchange, { code: 'session_mismatch', detail: 'This MCP session was opened with another API key' });
        else if (owner === 'unknown') {
          replies.refuse(exchange, {
            code: 'not_found',
            detail: 'No such MCP session (it ended, expired or was not opened through this gateway): initialize a new one',
          });
        } else replies.guarded(exchange, forward);
      },
      (error: unknown) => replies.fail(exchange, error),
    );
  }

  /** Whether the answer opens or ends the session's binding (Streamable HTTP). */
  changes(exchange: Exchange, statusCode: number, headers: IncomingHttpHeaders): boolean {
    if (exchange.transport !== 'streamable') return false;
    if (exchange.session === undefined) return statusCode < 300 && headers['mcp-session-id'] !== undefined;
    return statusCode === 404 || (exchange.request.method === 'DELETE' && statusCode < 300);
  }

  /** Binds the session the answer opens, or unbinds the one it ends (Streamable HTTP). */
  async book(exchange: Exchange, statusCode: number, headers: IncomingHttpHeaders): Promise<void> {
    if (exchange.transport !== 'streamable') return;
    if (exchange.session === undefined && headers['mcp-session-id'] !== undefined && statusCode < 300) {
      const issued = headerValue(headers['mcp-session-id']);
      if (issued === undefined || !isSessionId(issued) || !(await this.#bindings.bind(streamableBinding(issued), exchange.principal.keyId))) {
        throw new GatewayError('upstream_unavailable', 'The upstream issued an MCP session id that cannot be bound');
      }
    } else if (exchange.session !== undefined && (statusCode === 404 || (exchange.request.method === 'DELETE' && statusCode < 300))) {
      await this.#bindings.unbind(exchange.session);
    }
  }

  /** The binding of the session an event stream being relayed uses, until `end`. */
  streamBinding(exchange: Exchange): StreamBinding {
    return new StreamBinding(this.#bindings, exchange, this.#refreshMs);
  }
}

/**
 * The session of an open event stream: its binding kept from expiring while the stream is
 * open, and on the legacy transport the session its `endpoint` event names, bound to the key
 * and ended with the stream.
 */
export class StreamBinding {
  readonly #bindings: SessionBindings;
  readonly #keyId: number;
  readonly #refresh: NodeJS.Timeout;
  #legacySession: string | undefined;

  constructor(bindings: SessionBindings, exchange: Exchange, refreshMs: number) {
    this.#bindings = bindings;
    this.#keyId = exchange.principal.keyId;
    // While the stream is open its session is in use: keep the binding from expiring.
    this.#refresh = setInterval(() => {
      const session = this.#legacySession ?? exchange.session;
      if (session !== undefined) bindings.check(session, this.#keyId).catch(() => {});
    }, refreshMs);
    this.#refresh.unref();
  }

  /** The data of the legacy transport's `endpoint` event: the session it names is bound before the event is passed on. */
  async bindEndpoint(data: string): Promise<void> {
    const id = legacySessionIdOfEndpoint(data);
    if (id === undefined || this.#legacySession !== undefined) throw new Error('The upstream sent an endpoint event naming no single session');
    if (!(await this.#bindings.bind(legacyBinding(id), this.#keyId))) throw new Error('The legacy session is bound to another key');
    this.#legacySession = legacyBinding(id);
  }

  /** The stream ended, however it ended. */
  end(): void {
    clearInterval(this.#refresh);
    // The legacy session ends with its stream.
    if (this.#legacySession !== undefined) this.#bindings.unbind(this.#legacySession).catch(() => {});
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}
