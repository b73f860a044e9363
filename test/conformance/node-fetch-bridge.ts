import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * node:http ↔ web `Request`/`Response`. The v2 SDK serves MCP as `(Request) => Response`;
 * its own Node adapter (@modelcontextprotocol/node) is not a dependency of this repository,
 * and the little it does for us fits here.
 */

/** The request as a web `Request`, its body read whole (MCP bodies are small JSON). `signal` aborts it. */
export async function toWebRequest(request: IncomingMessage, origin: string, signal: AbortSignal): Promise<Request> {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    for (const one of Array.isArray(value) ? value : [value ?? '']) headers.append(name, one);
  }
  const method = request.method ?? 'GET';
  let body: Buffer | undefined;
  if (method !== 'GET' && method !== 'HEAD') {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    body = Buffer.concat(chunks);
  }
  return new Request(new URL(request.url ?? '/', origin), { method, headers, body, signal });
}

/**
 * Writes `response` to `res` chunk by chunk: an SSE stream must reach the client event by
 * event, not when it ends. When the client goes away the body is cancelled, which is how the
 * SDK learns that a stream (a GET stream, a subscriptions/listen stream) has no reader left.
 */
export async function sendWebResponse(res: ServerResponse, response: Response): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => (headers[name] = value));
  res.writeHead(response.status, headers);
  if (response.body === null) {
    res.end();
    return;
  }
  res.flushHeaders();
  const reader = response.body.getReader();
  res.once('close', () => void reader.cancel().catch(() => undefined));
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } catch {
    // The stream was cancelled (client gone) or failed mid-way: nothing more to send.
  }
  res.end();
}
