import { endToEnd, startLoopbackForwarder } from '../support/loopback-forwarder.ts';

/**
 * A loopback forwarder that adds `Authorization: Bearer <key>` to every request, for the
 * conformance CLI: its `server` command has no option to send a header (its only token
 * options are GitHub ones, for `tier-check`), and the gateway wants an API key on every MCP
 * request. Everything else passes as the CLI sent it, byte for byte: method, path, the other
 * headers (Host and Origin included, which the dns-rebinding scenario sets on purpose) and
 * the body, and the answer streams back unchanged (SSE event by event).
 *
 * What it cannot keep: Node's parser trims whitespace around header values before the shim
 * sees them (the RFC 9110 reading), so the whitespace cases of http-header-validation reach
 * the gateway already trimmed.
 */
export interface AuthShim {
  /** The URL to give the CLI: the shim's origin + the target's path. */
  url: string;
  /** `http://127.0.0.1:<port>`, the Origin a well-behaved local client sends. */
  origin: string;
  /** The origin to forward to (each request keeps its path), and the key; until then requests get 503. */
  forwardTo(targetOrigin: string, apiKey: string): void;
  close(): Promise<void>;
}

const AUTHORIZATION = new Set(['authorization']);

export async function startAuthShim(path = '/mcp'): Promise<AuthShim> {
  let apiKey = '';
  // Any Authorization the CLI sent is replaced by the key's.
  const forwarder = await startLoopbackForwarder({ request: (headers) => [...endToEnd(headers, AUTHORIZATION), 'Authorization', `Bearer ${apiKey}`] });
  return {
    url: `${forwarder.url}${path}`,
    origin: forwarder.url,
    forwardTo(targetOrigin, key) {
      apiKey = key;
      forwarder.forwardTo(targetOrigin);
    },
    close: () => forwarder.close(),
  };
}
