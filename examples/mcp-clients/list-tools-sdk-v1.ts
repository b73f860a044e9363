// The tools an API key may call, listed through Gatehouse with the TypeScript SDK 1.x
// (`npm install @modelcontextprotocol/sdk`). Run it with Node 22.18 or later:
//   GATEHOUSE_MCP_URL=http://127.0.0.1:8080/mcp GATEHOUSE_KEY=ghk_… node list-tools-sdk-v1.ts
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = new URL(process.env['GATEHOUSE_MCP_URL'] ?? 'http://127.0.0.1:8080/mcp');
const transport = new StreamableHTTPClientTransport(url, {
  // Sent with every request of the session; Gatehouse checks it and never forwards it.
  requestInit: { headers: { Authorization: `Bearer ${process.env['GATEHOUSE_KEY']}` } },
});
const client = new Client({ name: 'my-agent', version: '1.0.0' });
await client.connect(transport);
const { tools } = await client.listTools();
console.log(tools.map((tool) => tool.name).join('\n'));
await client.close();
