import type { CallToolResult, JsonSchemaType, McpServer } from '@modelcontextprotocol/server';
import { fromJsonSchema } from '@modelcontextprotocol/server';
import { z } from 'zod';

/**
 * The tools whose answer is fixed content, and the ones that only show a transport behaviour
 * (logging, progress, a closed stream). Names, texts and payloads are the suite's contract:
 * its scenarios call these names and read these shapes (the conformance repo's
 * examples/servers/typescript/README.md lists them).
 */

/** A 1×1 PNG and a minimal WAV: the smallest payloads the image and audio checks accept. */
export const PNG_BASE64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV_BASE64 = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

type Content = CallToolResult['content'];

const image = { type: 'image', data: PNG_BASE64, mimeType: 'image/png' } as const;

const FIXED: Record<string, { description: string; content: Content }> = {
  test_simple_text: {
    description: 'Answers one text item',
    content: [{ type: 'text', text: 'This is a simple text response for testing.' }],
  },
  test_image_content: { description: 'Answers one image item', content: [image] },
  test_audio_content: {
    description: 'Answers one audio item',
    content: [{ type: 'audio', data: WAV_BASE64, mimeType: 'audio/wav' }],
  },
  test_embedded_resource: {
    description: 'Answers one embedded resource',
    content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }],
  },
  test_multiple_content_types: {
    description: 'Answers text, image and resource together',
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      image,
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } },
    ],
  },
  // server-stateless: a stream that carries the result and nothing else (no request of its own).
  test_streaming_elicitation: { description: 'Answers without sending any request first', content: [{ type: 'text', text: 'result only' }] },
};

/** SEP-1613/SEP-2106: the 2020-12 keywords must reach tools/list exactly as written, so the schema is raw JSON. */
const SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
} as const;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });

export function registerContentTools(server: McpServer): void {
  for (const [name, { description, content }] of Object.entries(FIXED)) {
    server.registerTool(name, { description }, async () => ({ content }));
  }

  server.registerTool('test_error_handling', { description: 'Fails: the SDK answers isError' }, async () => {
    throw new Error('This tool intentionally returns an error for testing');
  });

  server.registerTool('json_schema_2020_12_tool', { description: 'Advertises a JSON Schema 2020-12 input schema', inputSchema: fromJsonSchema(SCHEMA_2020_12) }, async (args) =>
    text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`),
  );

  // SEP-2243: `x-mcp-header` makes a 2026-07-28 client mirror `region` into `Mcp-Param-Region`;
  // without such a tool the http-custom-header-server-validation scenario has nothing to test.
  // (`x-mcp-header` is an extension keyword, unknown to the SDK's JSON Schema type.)
  const region = { type: 'string', 'x-mcp-header': 'Region' } as JsonSchemaType;
  const mirrored = fromJsonSchema<{ region?: string; level?: number }>({ type: 'object', properties: { region, level: { type: 'integer' } } });
  server.registerTool('test_x_mcp_header', { description: 'Has an argument mirrored into a header', inputSchema: mirrored }, async (args) =>
    text(`region=${args.region ?? '<none>'}`),
  );

  registerTransportTools(server);
}

/** Tools whose point is what travels beside the result: notifications, or the stream itself. */
function registerTransportTools(server: McpServer): void {
  const noArgs = z.object({});

  server.registerTool('test_tool_with_logging', { description: 'Sends three log messages, then answers', inputSchema: noArgs }, async (_args, ctx) => {
    for (const data of ['Tool execution started', 'Tool processing data', 'Tool execution completed']) {
      await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data } });
      await sleep(50);
    }
    return text('Tool with logging executed successfully');
  });

  server.registerTool('test_tool_with_progress', { description: 'Reports progress 0, 50, 100 on the caller\'s token', inputSchema: noArgs }, async (_args, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    // Progress without a token the client chose would be a protocol error.
    if (progressToken !== undefined) {
      for (const progress of [0, 50, 100]) {
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` } });
        await sleep(50);
      }
    }
    return text(String(progressToken ?? 'no progress token'));
  });

  // server-stateless: `ctx.mcpReq.log` is gated on the request's `_meta` logLevel; the scenario
  // sends none and checks that no log message reaches it.
  server.registerTool('test_logging_tool', { description: 'Logs only when the request asked for a log level', inputSchema: noArgs }, async (_args, ctx) => {
    await ctx.mcpReq.log('info', 'test_logging_tool ran');
    return text('logged through the request-scoped channel');
  });

  // SEP-1699 (server-sse-polling): the server closes the call's stream mid-call; the client
  // reconnects with Last-Event-ID and gets the result replayed from the event store.
  server.registerTool('test_reconnection', { description: 'Closes its own SSE stream, then answers', inputSchema: noArgs }, async (_args, ctx) => {
    ctx.http?.closeSSE?.();
    await sleep(100);
    return text('Reconnection test completed successfully.');
  });
}
