/**
 * `node-floor`: the Node.js limit for proxying on this machine — a node:http server streaming
 * every request through one undici `Pool` with `stream()`, no routing, no auth, the same pool
 * options as src/proxy/forward.ts.
 *
 * Run as a process: PORT, HOST, UPSTREAM_URL.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { Pool } from 'undici';

const pool = new Pool(process.env.UPSTREAM_URL ?? 'http://127.0.0.1:3000', {
  connections: 128,
  pipelining: 1,
  keepAliveTimeout: 60_000,
  headersTimeout: 30_000,
  bodyTimeout: 0,
});

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect', 'te', 'trailer', 'proxy-connection', 'host']);

function endToEnd(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const copy: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !HOP_BY_HOP.has(name)) copy[name] = value;
  }
  return copy;
}

const server = createServer((request, response) => {
  const method = request.method ?? 'GET';
  pool
    .stream(
      {
        path: request.url ?? '/',
        method: method as 'GET',
        headers: endToEnd(request.headers),
        body: method === 'GET' || method === 'HEAD' ? null : request,
      },
      ({ statusCode, headers }) => {
        response.writeHead(statusCode, endToEnd(headers));
        return response;
      },
    )
    .catch(() => {
      if (!response.headersSent) response.writeHead(502);
      response.end();
    });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT ?? 8091), process.env.HOST ?? '127.0.0.1');
process.once('SIGTERM', () => server.close(() => void pool.close().then(() => process.exit(0))));
