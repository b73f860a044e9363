import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

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

/** Connection-scoped headers (RFC 9110 §7.6.1): each hop frames its own message. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']);

/** `rawHeaders` without hop-by-hop headers and without any Authorization the client sent. */
function passedOn(rawHeaders: string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (!HOP_BY_HOP.has(lower) && lower !== 'authorization') kept.push(name, rawHeaders[i + 1]!);
  }
  return kept;
}

export async function startAuthShim(path = '/mcp'): Promise<AuthShim> {
  let target: { url: URL; apiKey: string } | undefined;

  const server = createServer((req, res) => {
    if (target === undefined) {
      res.writeHead(503).end();
      return;
    }
    const upstream = httpRequest(
      { host: target.url.hostname, port: target.url.port, method: req.method, path: req.url, headers: [...passedOn(req.rawHeaders), 'Authorization', `Bearer ${target.apiKey}`] },
      (answer: IncomingMessage) => {
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, passedOn(answer.rawHeaders));
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    upstream.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    // The CLI closing a stream (an SSE GET it is done with) closes the forwarded one too.
    res.once('close', () => upstream.destroy());
    req.pipe(upstream);
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${origin}${path}`,
    origin,
    forwardTo(targetOrigin, apiKey) {
      target = { url: new URL(targetOrigin), apiKey };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
