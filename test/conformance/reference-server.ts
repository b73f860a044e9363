import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { createMcpHandler, isLegacyRequest, localhostAllowedHostnames, localhostAllowedOrigins, validateHostHeader, validateOriginHeader } from '@modelcontextprotocol/server';
import { createFixtureServer } from './fixture.ts';
import { createLegacySessions } from './legacy-sessions.ts';
import { sendWebResponse, toWebRequest } from '../../examples/platform/web-bridge.ts';

/**
 * The project's own MCP reference server for the conformance suite
 * (@modelcontextprotocol/conformance), written from the suite's scenarios and the
 * conformance repository's examples/servers/typescript/README.md: one endpoint that serves
 * both protocol eras from one fixture (fixture.ts).
 *
 * - 2026-07-28 requests (a per-request `_meta` envelope, `server/discover`,
 *   `subscriptions/listen`) go to the SDK's `createMcpHandler`, which owns that era's
 *   validation (MCP-Protocol-Version, Mcp-Method/Mcp-Name/Mcp-Param-* against the body).
 * - Everything else is 2025-era and gets a session of its own (legacy-sessions.ts).
 *
 * Built on the v2 SDK (@modelcontextprotocol/server): the installed v1 SDK (1.32) knows no
 * 2026-07-28, whose stateless wire would otherwise have to be written here by hand.
 *
 * Runnable on its own: `npx node test/conformance/reference-server.ts` (PORT to choose the port).
 */

export interface ReferenceServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  close(): Promise<void>;
}

export const MCP_PATH = '/mcp';

export async function startReferenceServer(port = 0): Promise<ReferenceServer> {
  const modern = createMcpHandler(() => createFixtureServer(modern.notify), { legacy: 'reject' });
  const legacy = createLegacySessions(() => createFixtureServer(modern.notify));
  let origin = '';

  const http = createServer((req, res) => {
    serve(req, res).catch((error: unknown) => {
      console.error('reference server:', error);
      if (!res.headersSent) writeRpcError(res, 500, -32603, 'Internal error');
      else res.destroy();
    });
  });

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (new URL(req.url ?? '/', origin).pathname !== MCP_PATH) return writeRpcError(res, 404, -32601, 'Not found');
    const refusal = rebindingRefusal(req);
    if (refusal !== undefined) return writeRpcError(res, 403, -32000, refusal);
    // The example platform's bridge: the request is aborted when the client leaves, which ends the SDK's exchange for it.
    const request = toWebRequest(req, res, await readBody(req));
    const response = (await isLegacyRequest(request)) ? await legacy.handle(request) : await modern.fetch(request);
    await sendWebResponse(response, res);
  }

  await new Promise<void>((resolve) => http.listen(port, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  return {
    url: `${origin}${MCP_PATH}`,
    async close() {
      await Promise.all([modern.close(), legacy.close()]);
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/**
 * DNS rebinding protection for a server on loopback (dns-rebinding-protection scenario): a
 * page on evil.example.com resolved to 127.0.0.1 sends its own Host and Origin, which are not
 * loopback names. The reason why, or undefined when the request may go on.
 */
function rebindingRefusal(req: IncomingMessage): string | undefined {
  const host = validateHostHeader(req.headers.host, localhostAllowedHostnames());
  if (!host.ok) return host.message;
  const origin = validateOriginHeader(req.headers.origin, localhostAllowedOrigins());
  return origin.ok ? undefined : origin.message;
}

function writeRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } }));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const server = await startReferenceServer(Number(process.env.PORT ?? 0));
  console.log(`MCP reference server on ${server.url}`);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void server.close().then(() => process.exit(0)));
}

/** The request's body, whole (MCP bodies are small JSON). */
async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
