import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  raw: string;
}

/**
 * Sends exact bytes over a socket and reads one response: for request shapes that fetch and
 * undici refuse to produce (smuggling, duplicate headers, unnormalised paths). Resolves when
 * the response is complete or the server closes; `status` is 0 if nothing came back.
 */
export function rawRequest(port: number, request: string | Buffer, timeoutMs = 10_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response within ${timeoutMs} ms: ${data.toString()}`));
    }, timeoutMs);
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(parse(data.toString('latin1')));
    };
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      const parsed = parse(data.toString('latin1'));
      if (parsed.status && isComplete(parsed)) finish();
    });
    socket.on('end', finish);
    socket.on('error', (error) => {
      if (data.length) finish();
      else {
        clearTimeout(timer);
        reject(error);
      }
    });
    socket.write(request);
  });
}

function parse(text: string): RawResponse & { complete?: boolean } {
  const headEnd = text.indexOf('\r\n\r\n');
  if (headEnd === -1) return { status: 0, headers: {}, body: '', raw: text };
  const [statusLine, ...lines] = text.slice(0, headEnd).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = text.slice(headEnd + 4);
  let complete = false;
  if (headers['content-length'] !== undefined) {
    complete = body.length >= Number(headers['content-length']);
    body = body.slice(0, Number(headers['content-length']));
  } else if (headers['transfer-encoding'] === 'chunked') {
    complete = body.endsWith('0\r\n\r\n');
    body = dechunk(body);
  }
  return { status: Number(statusLine!.split(' ')[1]), headers, body, raw: text, complete };
}

function isComplete(response: RawResponse & { complete?: boolean }): boolean {
  return response.complete === true;
}

function dechunk(body: string): string {
  let out = '';
  let rest = body;
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    if (lineEnd === -1) return out;
    const size = parseInt(rest.slice(0, lineEnd), 16);
    if (!size) return out;
    out += rest.slice(lineEnd + 2, lineEnd + 2 + size);
    rest = rest.slice(lineEnd + 4 + size);
  }
}
