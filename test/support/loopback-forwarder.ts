import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A loopback HTTP forwarder for tests that need a hop which changes a header on the way: each
 * request goes to the target origin with its path, method and body as they came, its headers
 * (less hop-by-hop ones) through `request`; the answer streams back (SSE event by event) with
 * its headers through `answer`. Until `forwardTo` names a target, requests get 503.
 */
export interface LoopbackForwarder {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** How many answers came back from the target. */
  answered(): number;
  forwardTo(targetOrigin: string): void;
  close(): Promise<void>;
}

export interface HeaderRewrites {
  /** The request's headers as sent on, flat `[name, value, …]`, from the client's (hop-by-hop ones left out). */
  request?: (headers: string[]) => string[];
  /** The answer's headers as sent back, from the target's (hop-by-hop ones left out). */
  answer?: (headers: string[]) => string[];
}

/** Connection-scoped headers (RFC 9110 §7.6.1): each hop frames its own message. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']);

/** `rawHeaders` without hop-by-hop headers, and without those `dropped` names (lower case). */
export function endToEnd(rawHeaders: string[], dropped: ReadonlySet<string> = new Set()): string[] {
  const kept: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const lower = rawHeaders[i]!.toLowerCase();
    if (!HOP_BY_HOP.has(lower) && !dropped.has(lower)) kept.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return kept;
}

const unchanged = (headers: string[]) => headers;

export async function startLoopbackForwarder(rewrites: HeaderRewrites): Promise<LoopbackForwarder> {
  const { request: rewriteRequest = unchanged, answer: rewriteAnswer = unchanged } = rewrites;
  let target: URL | undefined;
  let answered = 0;
  const server = createServer((req, res) => {
    if (target === undefined) {
      res.writeHead(503).end();
      return;
    }
    const upstream = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: rewriteRequest(endToEnd(req.rawHeaders)) },
      (answer: IncomingMessage) => {
        answered++;
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, rewriteAnswer(endToEnd(answer.rawHeaders)));
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    upstream.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    // The client closing a stream (an SSE GET it is done with) closes the forwarded one too.
    res.once('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    answered: () => answered,
    forwardTo(targetOrigin) {
      target = new URL(targetOrigin);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A forwarder that sets `set` on every answer, replacing the target's headers of those names. */
export function startAnswerHeaderShim(set: Record<string, string>): Promise<LoopbackForwarder> {
  const replaced = new Set(Object.keys(set).map((name) => name.toLowerCase()));
  const added = Object.entries(set).flat();
  return startLoopbackForwarder({ answer: (headers) => [...endToEnd(headers, replaced), ...added] });
}
