import { z } from 'zod';

/** One execution of a tool, as the platform itself saw it. */
export interface RecordedToolCall {
  tool: string;
  arguments: unknown;
  at: Date;
  /** Headers of the HTTP request that carried the `tools/call` (lower-case names). */
  headers: Record<string, string | undefined>;
  /** `Mcp-Session-Id` (Streamable HTTP, stateful) or `sessionId` (legacy SSE); absent when stateless. */
  sessionId?: string;
}

export type ToolCallSink = (call: RecordedToolCall) => void;

/** The nine tools of the platform, in the order of the scope table in docs/mcp.md. */
export const PLATFORM_TOOL_NAMES = [
  'place_outbound_call',
  'search_knowledge_base',
  'fetch_call_transcript',
  'list_agents',
  'get_agent_status',
  'record_event',
  'lookup_end_user',
  'call_custom_tool',
  'delegate_task_to_orchestrator',
] as const;

export type PlatformToolName = (typeof PLATFORM_TOOL_NAMES)[number];

const agentId = z.number().int().positive().optional().describe('The agent acting; defaults to the caller\'s bound agent');

/**
 * get_agent_status's own `agent_id`, mirrored into `Mcp-Param-Agent-Id` by 2026-07-28 clients
 * (Streamable HTTP, "Custom Headers from Tool Parameters"): `.meta()` puts `x-mcp-header` into
 * the JSON Schema both SDKs list. Not on the shared `agentId`: one annotated tool is enough.
 */
const mirroredAgentId = agentId.meta({ 'x-mcp-header': 'Agent-Id' });

interface ToolDefinition {
  description: string;
  inputSchema: z.ZodRawShape;
  result(args: Record<string, unknown>, callerAgentId: number): unknown;
}

const AGENTS = [
  { agent_id: 1, name: 'Front desk', status: 'active' },
  { agent_id: 2, name: 'Collections', status: 'active' },
  { agent_id: 7, name: 'Night shift', status: 'paused' },
];

// Canned, deterministic answers: enough for a demo and for asserting what got through.
const TOOLS: Record<PlatformToolName, ToolDefinition> = {
  place_outbound_call: {
    description: 'Place an outbound phone call from an agent.',
    inputSchema: { to: z.string().min(3).describe('E.164 phone number'), purpose: z.string().optional(), agent_id: agentId },
    result: (args, agent) => ({ call_id: 'call_0001', status: 'queued', to: args['to'], agent_id: agent }),
  },
  search_knowledge_base: {
    description: 'Search the agent knowledge base.',
    inputSchema: { query: z.string().min(1), limit: z.number().int().min(1).max(20).optional(), agent_id: agentId },
    result: (args) => ({
      query: args['query'],
      results: [{ document_id: 'kb_42', title: 'Opening hours', snippet: 'We are open 9:00-17:00, Monday to Friday.', score: 0.92 }],
    }),
  },
  fetch_call_transcript: {
    description: 'Fetch the transcript of a finished call.',
    inputSchema: { call_id: z.string().min(1), agent_id: agentId },
    result: (args) => ({
      call_id: args['call_id'],
      turns: [
        { speaker: 'agent', text: 'Hello, how can I help?' },
        { speaker: 'caller', text: 'When are you open?' },
      ],
    }),
  },
  list_agents: {
    description: 'List the agents of the platform.',
    inputSchema: { status: z.enum(['active', 'paused']).optional() },
    result: (args) => ({ agents: AGENTS.filter((agent) => args['status'] === undefined || agent.status === args['status']) }),
  },
  get_agent_status: {
    description: 'Get the status of one agent.',
    inputSchema: { agent_id: mirroredAgentId },
    result: (_args, agent) => ({ agent_id: agent, status: AGENTS.find((a) => a.agent_id === agent)?.status ?? 'active', active_calls: 0 }),
  },
  record_event: {
    description: 'Record an event on an agent timeline.',
    inputSchema: { type: z.string().min(1), payload: z.record(z.string(), z.unknown()).optional(), agent_id: agentId },
    result: (args, agent) => ({ event_id: 'evt_0001', type: args['type'], agent_id: agent, recorded: true }),
  },
  lookup_end_user: {
    description: 'Look up what the platform remembers about an end user.',
    inputSchema: { phone: z.string().optional(), email: z.string().optional(), agent_id: agentId },
    result: (args) => ({ end_user_id: 'usr_0001', phone: args['phone'] ?? null, email: args['email'] ?? null, last_contact: '2025-01-01T00:00:00Z' }),
  },
  call_custom_tool: {
    description: 'Invoke a customer-defined tool.',
    inputSchema: { name: z.string().min(1), arguments: z.record(z.string(), z.unknown()).optional(), agent_id: agentId },
    result: (args) => ({ tool: args['name'], output: 'ok' }),
  },
  delegate_task_to_orchestrator: {
    description: 'Hand a task to the orchestrator agent.',
    inputSchema: { task: z.string().min(1), priority: z.enum(['low', 'normal', 'high']).optional(), agent_id: agentId },
    result: (args, agent) => ({ task_id: 'task_0001', status: 'accepted', priority: args['priority'] ?? 'normal', delegated_by: agent }),
  },
};

/** A tool's description and input schema, the same for both SDK generations (a Zod raw shape). */
export interface PlatformToolSpec {
  description: string;
  inputSchema: z.ZodRawShape;
}

export function platformTool(name: PlatformToolName): PlatformToolSpec {
  const { description, inputSchema } = TOOLS[name];
  return { description, inputSchema };
}

/** What the SDK tells a tool handler about the HTTP request that carried the call. */
export interface ToolCallContext {
  headers: Record<string, string | undefined>;
  sessionId?: string | undefined;
}

/** Runs one tool for either SDK's handler: the call is reported to `record` first, then answered. */
export function runPlatformTool(
  name: PlatformToolName,
  args: Record<string, unknown>,
  { headers, sessionId }: ToolCallContext,
  record: ToolCallSink,
): { content: Array<{ type: 'text'; text: string }> } {
  record({ tool: name, arguments: args, at: new Date(), headers, ...(sessionId === undefined ? {} : { sessionId }) });
  const result = TOOLS[name].result(args, callerAgentId(args, headers));
  return { content: [{ type: 'text', text: JSON.stringify(result) }] };
}

function callerAgentId(args: Record<string, unknown>, headers: Record<string, string | undefined>): number {
  if (typeof args['agent_id'] === 'number') return args['agent_id'];
  const bound = Number(headers['x-auth-agent-id']);
  return Number.isSafeInteger(bound) && bound > 0 ? bound : 1;
}
