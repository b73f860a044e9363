import type { CallToolResult, McpServer, ServerContext } from '@modelcontextprotocol/server';
import { z } from 'zod';

/**
 * 2025-era tools that ask the client something mid-call (sampling, elicitation) on the
 * call's own stream, and answer with what came back. The 2026-07-28 era has no such
 * server-to-client requests (see fixture-input-required.ts); there `send` throws, which these
 * tools report as text, as a 2025 server would for a client without the capability.
 */

type ElicitSchema = { type: 'object'; properties: Record<string, object>; required: string[] };

const string = (description: string) => ({ type: 'string', description });
const choices = { type: 'string', enum: ['option1', 'option2', 'option3'] } as const;
const titled = (prefix: string, words: string[]) => words.map((word, index) => ({ const: `value${index + 1}`, title: `${word} ${prefix}` }));

/** SEP-1034: a default for every primitive type. */
const WITH_DEFAULTS: ElicitSchema = {
  type: 'object',
  properties: {
    name: { ...string('User name'), default: 'John Doe' },
    age: { type: 'integer', description: 'User age', default: 30 },
    score: { type: 'number', description: 'User score', default: 95.5 },
    status: { ...string('User status'), enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', description: 'Verification status', default: true },
  },
  required: [],
};

/** SEP-1330: the five enum shapes (plain, titled, legacy enumNames, and both as multi-select). */
const WITH_ENUMS: ElicitSchema = {
  type: 'object',
  properties: {
    untitledSingle: { ...string('Select one option'), enum: choices.enum },
    titledSingle: { ...string('Select one option with titles'), oneOf: titled('Option', ['First', 'Second', 'Third']) },
    legacyEnum: { ...string('Select one option (legacy)'), enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
    untitledMulti: { type: 'array', description: 'Select multiple options', minItems: 1, maxItems: 3, items: choices },
    titledMulti: { type: 'array', description: 'Select multiple options with titles', minItems: 1, maxItems: 3, items: { anyOf: titled('Choice', ['First', 'Second', 'Third']) } },
  },
  required: [],
};

const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });

/** Runs `ask`; a refusal or an error becomes the tool's text, never a failed call. */
async function answer(ask: () => Promise<string>): Promise<CallToolResult> {
  try {
    return text(await ask());
  } catch (error) {
    return text(`Not supported or error: ${error instanceof Error ? error.message : String(error)}`);
  }
}

async function elicit(ctx: ServerContext, message: string, requestedSchema: ElicitSchema): Promise<string> {
  const result = await ctx.mcpReq.send({ method: 'elicitation/create', params: { message, requestedSchema } });
  return `action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;
}

export function registerClientRequestTools(server: McpServer): void {
  const prompt = z.object({ prompt: z.string().describe('The prompt to send to the LLM') });
  server.registerTool('test_sampling', { description: 'Asks the client for an LLM completion', inputSchema: prompt }, async (args, ctx) =>
    answer(async () => {
      const result = await ctx.mcpReq.send({
        method: 'sampling/createMessage',
        params: { messages: [{ role: 'user', content: { type: 'text', text: args.prompt } }], maxTokens: 100 },
      });
      const content = Array.isArray(result.content) ? result.content[0] : result.content;
      return `LLM response: ${content?.type === 'text' ? content.text : 'No response'}`;
    }),
  );

  const message = z.object({ message: z.string().describe('The message to show the user') });
  const responseSchema: ElicitSchema = { type: 'object', properties: { response: string("User's response") }, required: ['response'] };
  server.registerTool('test_elicitation', { description: 'Asks the user for input', inputSchema: message }, async (args, ctx) =>
    answer(async () => `User response: ${await elicit(ctx, args.message, responseSchema)}`),
  );

  const noArgs = z.object({});
  server.registerTool('test_elicitation_sep1034_defaults', { description: 'Elicits a form with defaults (SEP-1034)', inputSchema: noArgs }, async (_args, ctx) =>
    answer(async () => `Elicitation completed: ${await elicit(ctx, 'Please review and update the form fields with defaults', WITH_DEFAULTS)}`),
  );
  server.registerTool('test_elicitation_sep1330_enums', { description: 'Elicits every enum shape (SEP-1330)', inputSchema: noArgs }, async (_args, ctx) =>
    answer(async () => `Elicitation completed: ${await elicit(ctx, 'Please select options from the enum fields', WITH_ENUMS)}`),
  );
}
