import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CannedAnswer } from './json-rpc.ts';

// node:http on one side, the web-standard `Request`/`Response` of `@modelcontextprotocol/server`
// on the other (what `toNodeHandler` of `@modelcontextprotocol/node` does, without the package).

/**
 * A web `Request` for a node request whose body was already read (`raw`): the headers as
 * node folded them (so a tool handler sees what a 1.x server sees), aborted when the
 * client goes away before its answer has been written.
 */
export function toWebRequest(request: IncomingMessage, response: ServerResponse, raw: string): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  const aborted = new AbortController();
  response.once('close', () => {
    if (!response.writableFinished) aborted.abort();
  });
  const method = request.method ?? 'GET';
  const hasBody = method !== 'GET' && method !== 'HEAD' && raw !== '';
  return new Request(new URL(request.url ?? '/', 'http://platform.invalid'), {
    method,
    headers,
    signal: aborted.signal,
    // Bytes, not a string: a string body would add a Content-Type the client never sent.
    ...(hasBody ? { body: Buffer.from(raw) } : {}),
  });
}

/** Writes a web `Response` to node; an event stream is written as it comes and cancelled when the client goes away. */
export async function sendWebResponse(answer: Response, response: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  answer.headers.forEach((value, name) => {
    headers[name] = value;
  });
  response.writeHead(answer.status, headers);
  if (answer.body === null) {
    response.end();
    return;
  }
  response.flushHeaders();
  const reader = answer.body.getReader();
  response.once('close', () => {
    reader.cancel().catch(() => {});
  });
  try {
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) response.write(chunk.value);
  } catch {
    // Cancelled: the client went away.
  }
  response.end();
}

/** A canned answer as a web `Response`. */
export function webResponseOf({ status, headers, body }: CannedAnswer): Response {
  return new Response(JSON.stringify(body), { status, headers });
}

/** Headers of a web request as a 1.x tool handler gets them: lower-case names, one string each. */
export function headersRecord(headers: Headers | undefined): Record<string, string | undefined> {
  const record: Record<string, string | undefined> = {};
  headers?.forEach((value, name) => {
    record[name] = value;
  });
  return record;
}
