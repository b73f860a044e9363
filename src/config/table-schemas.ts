import { z } from 'zod';
import { LICENSED_FEATURES } from './env.ts';
import { RATE_LIMIT_BOUNDS } from './rate-limit.ts';

/**
 * The shapes of `routes.yaml` and `mcp-tools.yaml` as written: what a file must look like
 * before its entries are compiled and checked against each other (route-table.ts, mcp-table.ts).
 */

export const SCOPE = /^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$/;
export const MCP_PREFIX = 'mcp:';
const ROUTE_NAME = /^[a-z][a-z0-9_]*$/;
const METHOD = /^[A-Z]+$/;
/** MCP tool names (MCP spec: 1–128 of A-Z a-z 0-9 _ - .). */
const TOOL = /^[A-Za-z0-9_.-]{1,128}$/;

/** A rate limit as the API spells it: `{requests, per_seconds}`, in the API's bounds. */
const rateLimitSchema = z.strictObject({
  requests: z.number().int('must be an integer').min(RATE_LIMIT_BOUNDS.requests.min).max(RATE_LIMIT_BOUNDS.requests.max),
  per_seconds: z.number().int('must be an integer').min(RATE_LIMIT_BOUNDS.perSeconds.min).max(RATE_LIMIT_BOUNDS.perSeconds.max),
});

const methodList = z.union([z.literal('*'), z.array(z.string().regex(METHOD, 'must be an upper-case HTTP method')).min(1)], {
  error: 'must be "*" or a non-empty list of upper-case HTTP methods',
});

const routeSchema = z.strictObject({
  name: z.string().regex(ROUTE_NAME, 'must match [a-z][a-z0-9_]*'),
  path: z.string().min(1),
  methods: methodList,
  credential: z.enum(['api_key', 'admin', 'none']),
  scope: z.string().optional(),
  agent_param: z.string().optional(),
  mcp: z.enum(['streamable', 'sse', 'messages']).optional(),
});

export const routesFileSchema = z.strictObject({
  scopes: z.array(z.string().regex(SCOPE, 'must look like area:action (lower case)')).default([]),
  routes: z.array(routeSchema).min(1, 'must list at least one route'),
});

export const mcpFileSchema = z.strictObject({
  scopes: z.record(
    z.string(),
    z.strictObject({
      feature: z.enum(LICENSED_FEATURES).optional(),
      tools: z.array(z.string().regex(TOOL, 'must be 1-128 of A-Z a-z 0-9 _ - .')).min(1, 'must list at least one tool'),
    }),
  ),
  aliases: z.record(z.string(), z.array(z.string()).min(1, 'must name at least one scope')).default({}),
  methods: z.record(z.string(), z.string()).default({}),
  responses: z.string().default('deny'),
  /** Tool → its rate limit, counted per key (docs/mcp.md, "Rate limits per tool"). */
  limits: z.record(z.string(), rateLimitSchema).default({}),
});

export type RoutesFile = z.output<typeof routesFileSchema>;
export type RouteEntry = z.output<typeof routeSchema>;
export type McpFile = z.output<typeof mcpFileSchema>;
