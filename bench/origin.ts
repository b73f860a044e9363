/**
 * The benchmark's upstream: a minimal node:http server, so the upstream is never what a
 * scenario measures. It drains the body and answers a small JSON document; on MCP_PATH a
 * canned JSON-RPC result (the gateway's work on an MCP call is in the request, not the answer).
 *
 * Run as a process: PORT, HOST, MCP_PATH.
 */
import { createServer } from 'node:http';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';
const mcpPath = process.env.MCP_PATH ?? '/mcp';

const plain = Buffer.from('{"ok":true}');
const toolResult = Buffer.from(
  JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: '{"results":[{"document_id":"kb_42"}]}' }] } }),
);

const server = createServer((request, response) => {
  const body = request.url === mcpPath ? toolResult : plain;
  request.on('data', () => {});
  request.on('end', () => {
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    response.end(body);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(port, host);
process.once('SIGTERM', () => server.close(() => process.exit(0)));
