import type { LoggingLevel, McpServer, PromptMessage } from '@modelcontextprotocol/server';
import { ResourceTemplate } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { PNG_BASE64 } from './fixture-content.ts';
import { registerInputRequiredPrompt } from './fixture-input-required.ts';

/** Resources, prompts, and the small request handlers the 2025-era scenarios call (logging, completion, subscriptions). */

export function registerResources(server: McpServer): void {
  const text = (uri: string, body: string) => ({ contents: [{ uri, mimeType: 'text/plain', text: body }] });
  server.registerResource('static-text', 'test://static-text', { title: 'Static Text Resource', mimeType: 'text/plain' }, async () =>
    text('test://static-text', 'This is the content of the static text resource.'),
  );
  server.registerResource('static-binary', 'test://static-binary', { title: 'Static Binary Resource', mimeType: 'image/png' }, async () => ({
    contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: PNG_BASE64 }],
  }));
  // The resources-subscribe scenarios only need a URI that can be subscribed to: nothing ever
  // changes it, so no update is sent.
  server.registerResource('watched-resource', 'test://watched-resource', { title: 'Watched Resource', mimeType: 'text/plain' }, async () =>
    text('test://watched-resource', 'Watched resource content'),
  );
  const template = new ResourceTemplate('test://template/{id}/data', { list: undefined });
  server.registerResource('template', template, { title: 'Resource Template', mimeType: 'application/json' }, async (uri, { id }) => ({
    contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }],
  }));
}

export function registerPrompts(server: McpServer): void {
  const user = (content: PromptMessage['content']): PromptMessage => ({ role: 'user', content });
  server.registerPrompt('test_simple_prompt', { title: 'Simple Test Prompt', description: 'A prompt without arguments' }, async () => ({
    messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })],
  }));
  const pair = z.object({ arg1: z.string().describe('First test argument'), arg2: z.string().describe('Second test argument') });
  server.registerPrompt('test_prompt_with_arguments', { title: 'Prompt With Arguments', description: 'A prompt with two required arguments', argsSchema: pair }, async ({ arg1, arg2 }) => ({
    messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })],
  }));
  const resourceUri = z.object({ resourceUri: z.string().describe('URI of the resource to embed') });
  server.registerPrompt('test_prompt_with_embedded_resource', { title: 'Prompt With Embedded Resource', description: 'A prompt embedding a resource', argsSchema: resourceUri }, async (args) => ({
    messages: [
      user({ type: 'resource', resource: { uri: args.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
      user({ type: 'text', text: 'Please process the embedded resource above.' }),
    ],
  }));
  server.registerPrompt('test_prompt_with_image', { title: 'Prompt With Image', description: 'A prompt with an image' }, async () => ({
    messages: [user({ type: 'image', data: PNG_BASE64, mimeType: 'image/png' }), user({ type: 'text', text: 'Please analyze the image above.' })],
  }));
  registerInputRequiredPrompt(server);
}

/**
 * logging/setLevel, completion/complete and resources/(un)subscribe: the scenarios check that
 * the server accepts them, not what it does with them, so each answers `{}` (or no
 * completions) and logs what it was asked.
 */
export function registerUtilityHandlers(server: McpServer): void {
  const log = (level: LoggingLevel, data: string) => {
    // No client may be listening (a request already answered): nothing to do about it.
    server.server.sendLoggingMessage({ level, logger: 'reference-server', data }).catch(() => undefined);
  };
  server.server.setRequestHandler('logging/setLevel', async (request) => {
    log('info', `Log level set to: ${request.params.level}`);
    return {};
  });
  server.server.setRequestHandler('completion/complete', async () => ({ completion: { values: [], total: 0, hasMore: false } }));
  server.server.setRequestHandler('resources/subscribe', async (request) => {
    log('info', `Subscribed to resource: ${request.params.uri}`);
    return {};
  });
  server.server.setRequestHandler('resources/unsubscribe', async (request) => {
    log('info', `Unsubscribed from resource: ${request.params.uri}`);
    return {};
  });
}
