/**
 * The load scenarios of docs/performance.md, as data. Every scenario sends a POST
 * of a small JSON body with fixed connections; what differs is where it goes and with what
 * credential. `cold-keys` and `invalid-keys` are not plain load runs (bench/cold.ts,
 * bench/invalid.ts).
 */

/** Which server a scenario loads. */
export type Target = 'origin' | 'bare-proxy' | 'node-floor' | 'nginx' | 'gateway' | 'gateway-redis';

/** Which credential it presents: `many` rotates through the 10,000 keys; `limited-key` has a rate limit it never reaches. */
export type Credential = 'events-key' | 'mcp-key' | 'admin-token' | 'many' | 'limited-key';

export interface LoadScenario {
  name: string;
  target: Target;
  path: string;
  body: string;
  headers: Record<string, string>;
  credential: Credential;
  what: string;
}

export const EVENTS_PATH = '/api/v1/agents/1/events';
export const ADMIN_PATH = '/dashboard/api/widgets';
export const MCP_PATH = '/mcp';

export const EVENT_BODY = JSON.stringify({ type: 'call.completed', call_id: 'call_0001', duration_s: 42 });
export const MCP_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'search_knowledge_base', arguments: { query: 'opening hours', limit: 3 } },
});

const JSON_HEADERS = { 'content-type': 'application/json' };
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

const events = { path: EVENTS_PATH, body: EVENT_BODY, headers: JSON_HEADERS };
const mcp = { path: MCP_PATH, body: MCP_BODY, headers: MCP_HEADERS };

/**
 * In table order. The references carry the same Authorization header as the gateway rows, so
 * every row sends the same bytes.
 */
export const LOAD_SCENARIOS: readonly LoadScenario[] = [
  { name: 'direct', target: 'origin', ...events, credential: 'events-key', what: 'the upstream itself' },
  { name: 'bare-proxy', target: 'bare-proxy', ...events, credential: 'events-key', what: '@fastify/http-proxy, no auth' },
  { name: 'node-floor', target: 'node-floor', ...events, credential: 'events-key', what: 'node:http + undici Pool.stream, no auth' },
  { name: 'nginx-proxy', target: 'nginx', ...events, credential: 'events-key', what: 'nginx, one worker, keep-alive upstream' },
  { name: 'events-cached', target: 'gateway', ...events, credential: 'events-key', what: 'gateway, one valid API key' },
  { name: 'events-many-keys', target: 'gateway', ...events, credential: 'many', what: 'gateway, 10,000 keys in rotation' },
  { name: 'events-rate-limited', target: 'gateway', ...events, credential: 'limited-key', what: 'gateway, one key with a rate limit it never reaches' },
  { name: 'events-rate-limited-redis', target: 'gateway-redis', ...events, credential: 'limited-key', what: 'the same, its limit shared through Redis' },
  { name: 'node-floor-mcp', target: 'node-floor', ...mcp, credential: 'mcp-key', what: 'node-floor on the MCP tools/call body' },
  { name: 'mcp-tools-call', target: 'gateway', ...mcp, credential: 'mcp-key', what: 'gateway, MCP tools/call inspected' },
  { name: 'admin-jwt', target: 'gateway', path: ADMIN_PATH, body: EVENT_BODY, headers: JSON_HEADERS, credential: 'admin-token', what: 'gateway, admin JWT on an admin route' },
];
