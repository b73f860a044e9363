import type { ServerNotifier } from '@modelcontextprotocol/server';
import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { registerClientRequestTools } from './fixture-client-requests.ts';
import { registerContentTools } from './fixture-content.ts';
import { requestStateCodec, registerInputRequiredTools } from './fixture-input-required.ts';
import { registerPrompts, registerResources, registerUtilityHandlers } from './fixture-resources-prompts.ts';

/**
 * The reference server's MCP surface: every tool, resource and prompt the conformance suite's
 * server scenarios call. One definition serves both protocol eras (the 2025 sessions and the
 * 2026-07-28 per-request path), so the two can never disagree about what exists.
 */
export function createFixtureServer(notify: ServerNotifier): McpServer {
  const server = new McpServer(
    { name: 'gatehouse-conformance-reference', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        // Deprecated in 2026-07-28 (SEP-2577) but still what 2025 logging/setLevel negotiates.
        logging: {},
        completions: {},
      },
      requestState: { verify: requestStateCodec.verify },
    },
  );
  registerContentTools(server);
  registerClientRequestTools(server);
  registerInputRequiredTools(server);
  registerResources(server);
  registerPrompts(server);
  registerUtilityHandlers(server);
  registerChangeTriggers(server, notify);
  return server;
}

/**
 * server-stateless opens a `subscriptions/listen` stream, calls one of these, and expects the
 * matching list_changed notification on that stream. Nothing really changes (each request has
 * its own server); publishing the event is what is under test.
 */
function registerChangeTriggers(server: McpServer, notify: ServerNotifier): void {
  const noArgs = z.object({});
  const published = (what: string) => ({ content: [{ type: 'text' as const, text: `${what} published` }] });
  server.registerTool('test_trigger_tool_change', { description: 'Publishes tools/list_changed', inputSchema: noArgs }, async () => {
    notify.toolsChanged();
    return published('tools/list_changed');
  });
  server.registerTool('test_trigger_prompt_change', { description: 'Publishes prompts/list_changed', inputSchema: noArgs }, async () => {
    notify.promptsChanged();
    return published('prompts/list_changed');
  });
}

