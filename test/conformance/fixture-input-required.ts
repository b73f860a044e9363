import { randomBytes, randomUUID } from 'node:crypto';
import type { CallToolResult, ClientCapabilities, InputRequest, InputRequiredResult, InputRequests, McpServer, ServerContext } from '@modelcontextprotocol/server';
import { acceptedContent, CLIENT_CAPABILITIES_META_KEY, createRequestStateCodec, inputRequired, inputResponse } from '@modelcontextprotocol/server';
import { z } from 'zod';

/**
 * 2026-07-28 multi-round-trip tools (SEP-2322): instead of asking the client mid-call, a tool
 * returns `input_required` with the questions, and the client calls again with the answers
 * (`inputResponses`) and the opaque `requestState` it was given. Nothing is kept between the
 * rounds: every request gets a fresh server, so the state travels with the client.
 */

type RoundState = { tool: string; round?: number; name?: string; nonce: string };

/**
 * `requestState` comes back from the client, so it is sealed (HMAC) when handed out and the
 * server refuses one that does not verify with -32602 before any handler runs
 * (input-required-result-tampered-state). One key per process is enough: every server of
 * this process mints and verifies with it.
 */
export const requestStateCodec = createRequestStateCodec<RoundState>({ key: randomBytes(32) });

const form = (message: string, field: string, type: 'string' | 'boolean' = 'string') =>
  inputRequired.elicit({ message, requestedSchema: { type: 'object', properties: { [field]: type === 'boolean' ? { type: 'boolean' } : { type: 'string' } }, required: [field] } });
const sampling = (text: string, maxTokens: number) => inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text } }], maxTokens });
const mint = (tool: string, extra: Partial<RoundState> = {}) => requestStateCodec.mint({ tool, nonce: randomUUID(), ...extra });
const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });

type Responses = ServerContext['mcpReq']['inputResponses'];
type Step = (ctx: ServerContext) => Promise<CallToolResult | InputRequiredResult>;

/** Asks for `requests` until every one of them came back answered in a usable shape. */
function whenAnswered(requests: () => Promise<{ inputRequests: InputRequests; requestState?: string }>, answered: (r: Responses, ctx: ServerContext) => boolean, done: (ctx: ServerContext) => string): Step {
  return async (ctx) => (answered(ctx.mcpReq.inputResponses, ctx) ? text(done(ctx)) : inputRequired(await requests()));
}

/** The sealed state this tool handed out came back (the seam has verified it by now). */
const stateOf = (tool: string) => (ctx: ServerContext) => ctx.mcpReq.requestState<RoundState>()?.tool === tool;

const name = (responses: Responses, key: string) => acceptedContent<{ name: string }>(responses, key)?.name;
const is = (kind: 'sampling' | 'roots') => (responses: Responses, key: string) => inputResponse(responses, key).kind === kind;

const STEPS: Record<string, Step> = {
  test_input_required_result_elicitation: whenAnswered(
    async () => ({ inputRequests: { user_name: form('What is your name?', 'name') } }),
    (r) => typeof name(r, 'user_name') === 'string',
    (ctx) => `Hello, ${name(ctx.mcpReq.inputResponses, 'user_name')}!`,
  ),
  test_input_required_result_sampling: whenAnswered(
    async () => ({ inputRequests: { capital_question: sampling('What is the capital of France?', 100) } }),
    (r) => is('sampling')(r, 'capital_question'),
    () => 'Sampling response received',
  ),
  test_input_required_result_list_roots: whenAnswered(
    async () => ({ inputRequests: { client_roots: inputRequired.listRoots() } }),
    (r) => is('roots')(r, 'client_roots'),
    () => 'Roots received',
  ),
  test_input_required_result_request_state: whenAnswered(
    async () => ({ inputRequests: { confirm: form('Please confirm', 'ok', 'boolean') }, requestState: await mint('request_state') }),
    (r, ctx) => acceptedContent(r, 'confirm') !== undefined && stateOf('request_state')(ctx),
    () => 'state-ok: requestState verified',
  ),
  test_input_required_result_multiple_inputs: whenAnswered(
    async () => ({
      inputRequests: { user_name: form('What is your name?', 'name'), greeting: sampling('Generate a greeting', 50), client_roots: inputRequired.listRoots() },
      requestState: await mint('multiple_inputs'),
    }),
    (r) => typeof name(r, 'user_name') === 'string' && is('sampling')(r, 'greeting') && is('roots')(r, 'client_roots'),
    (ctx) => `All three answers received from ${name(ctx.mcpReq.inputResponses, 'user_name')}`,
  ),
  test_input_required_result_tampered_state: whenAnswered(
    async () => ({ inputRequests: { confirm: form('Please confirm', 'ok', 'boolean') }, requestState: await mint('tampered_state') }),
    (r, ctx) => acceptedContent(r, 'confirm') !== undefined && stateOf('tampered_state')(ctx),
    () => 'integrity-ok: requestState verified',
  ),
  test_input_required_result_multi_round: multiRound,
  test_input_required_result_capabilities: askWhatTheClientCanAnswer,
  // server-stateless: a sampling question to a client that declared no sampling is refused by
  // the SDK with -32021 (missing client capability), before anything is returned.
  test_missing_capability: whenAnswered(
    async () => ({ inputRequests: { llm_answer: sampling('Reply with the single word: pong', 16) } }),
    (r) => is('sampling')(r, 'llm_answer'),
    () => 'sampling round trip complete',
  ),
};

/** Two questions in two rounds; the round and the first answer live in the sealed state. */
async function multiRound(ctx: ServerContext): Promise<CallToolResult | InputRequiredResult> {
  const state = ctx.mcpReq.requestState<RoundState>();
  const round = state?.tool === 'multi_round' ? (state.round ?? 0) : 0;
  if (round === 0) return inputRequired({ inputRequests: { step1: form('Step 1: What is your name?', 'name') }, requestState: await mint('multi_round', { round: 1 }) });
  if (round === 1) {
    const who = name(ctx.mcpReq.inputResponses, 'step1') ?? 'unknown';
    return inputRequired({ inputRequests: { step2: form('Step 2: What is your favorite color?', 'color') }, requestState: await mint('multi_round', { round: 2, name: who }) });
  }
  const color = acceptedContent<{ color: string }>(ctx.mcpReq.inputResponses, 'step2')?.color ?? 'unknown';
  return text(`Multi-round complete: ${state?.name ?? 'unknown'} likes ${color}`);
}

/** Only asks what the request's declared client capabilities can answer. */
async function askWhatTheClientCanAnswer(ctx: ServerContext): Promise<CallToolResult | InputRequiredResult> {
  if (ctx.mcpReq.inputResponses !== undefined) return text('Capability-aware input requests answered');
  const envelope: Record<string, unknown> = ctx.mcpReq.envelope ?? {};
  const declared = (envelope[CLIENT_CAPABILITIES_META_KEY] ?? {}) as ClientCapabilities;
  const offered: [keyof typeof declared, string, InputRequest][] = [
    ['elicitation', 'user_name', form('What is your name?', 'name')],
    ['sampling', 'greeting', sampling('Generate a short greeting', 50)],
    ['roots', 'client_roots', inputRequired.listRoots()],
  ];
  const inputRequests: InputRequests = Object.fromEntries(offered.filter(([capability]) => declared[capability] !== undefined).map(([, key, request]) => [key, request]));
  if (Object.keys(inputRequests).length === 0) return text('No declared client capability can answer a question');
  return inputRequired({ inputRequests });
}

export function registerInputRequiredTools(server: McpServer): void {
  for (const [tool, step] of Object.entries(STEPS)) {
    server.registerTool(tool, { description: `Multi-round-trip fixture (${tool})`, inputSchema: z.object({}) }, async (_args, ctx) => step(ctx));
  }
}

/** The prompt form of the same pattern (input-required-result-non-tool-request). */
export function registerInputRequiredPrompt(server: McpServer): void {
  server.registerPrompt('test_input_required_result_prompt', { description: 'Asks for context before rendering' }, async (ctx: ServerContext) => {
    const context = acceptedContent<{ context: string }>(ctx.mcpReq.inputResponses, 'user_context')?.context;
    if (typeof context !== 'string') return inputRequired({ inputRequests: { user_context: form('What context should the prompt use?', 'context') } });
    return { messages: [{ role: 'user', content: { type: 'text', text: `Use the following context: ${context}` } }] };
  });
}
