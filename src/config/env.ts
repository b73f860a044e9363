import { z } from 'zod';
import { parseDurationMs, parseDurationSeconds } from './duration.ts';
import { readRateLimit, withinBounds } from './rate-limit.ts';
import { isReservedPath } from './reserved-paths.ts';

/** Licensed features a deployment may enable (docs/api-keys.md, "Decisions where the spec is silent": licensed-feature scopes). */
export const LICENSED_FEATURES = ['events', 'recall', 'custom_tools', 'orchestrate'] as const;
export type LicensedFeature = (typeof LICENSED_FEATURES)[number];

export const DEFAULTS = {
  PORT: 8080,
  HOST: '0.0.0.0',
  OPS_PORT: 8081,
  UPSTREAM_URL: 'http://127.0.0.1:3000',
  DATA_DIR: './data',
  CONFIG_DIR: './config',
  ADMIN_SESSION_TTL: '8h',
  MCP_PATH: '/mcp',
  LOG_LEVEL: 'info',
  UPSTREAM_TIMEOUT: '30s',
  KEY_CACHE_SIZE: 100_000,
  KEY_CACHE_TTL: '5m',
  REDIS_COMMAND_TIMEOUT: '500ms',
  BODY_LIMIT: 1_048_576,
  ARGON2_MEMORY_KIB: 19_456,
  ARGON2_TIME_COST: 2,
  ARGON2_PARALLELISM: 1,
  ARGON2_CONCURRENCY: 2,
  HEADERS_TIMEOUT: '10s',
  REQUEST_TIMEOUT: '30s',
  KEEP_ALIVE_TIMEOUT: '5s',
  MAX_CONNECTIONS: 10_000,
  MAX_STREAMS_PER_KEY: 16,
  MCP_MAX_BATCH: 100,
} as const;

const port = z.coerce.number().int().min(0).max(65_535);
const positiveInt = z.coerce.number().int().positive();
const path = z.string().regex(/^\/[A-Za-z0-9._~\-/]*$/, 'must be an absolute path of plain characters');
/** A path the MCP endpoint is served on: never one the gateway keeps for itself (docs/security.md, "Reserved paths"). */
const mcpPath = path.refine((value) => !isReservedPath(value), 'lies under a path reserved for the gateway, so it would never be reached');
const url = (protocols: string[]) =>
  z.string().refine((value) => {
    try {
      return protocols.includes(new URL(value).protocol);
    } catch {
      return false;
    }
  }, `must be a ${protocols.map((p) => p.replace(':', '://')).join(' or ')} URL`);
const duration = (fn: (text: string) => number | undefined) =>
  z.string().transform((text, ctx) => {
    const value = fn(text);
    if (value === undefined) {
      ctx.addIssue({ code: 'custom', message: 'must be seconds or a duration such as 8h, 30m, 45s' });
      return z.NEVER;
    }
    return value;
  });
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((value) => value === 'true' || value === '1' || value === 'yes');
const featureList = z.string().transform((text, ctx) => {
  const entries = text.split(',').map((entry) => entry.trim()).filter(Boolean);
  for (const entry of entries) {
    if (!(LICENSED_FEATURES as readonly string[]).includes(entry)) {
      ctx.addIssue({ code: 'custom', message: `unknown feature "${entry}" (known: ${LICENSED_FEATURES.join(', ')})` });
      return z.NEVER;
    }
  }
  return [...new Set(entries)] as LicensedFeature[];
});
/** Serialised origins (`https://app.example:8443`), kept as a browser sends them (lower case, no default port); a path or anything more is refused. */
const originList = z.string().transform((text, ctx) => {
  const origins = new Set<string>();
  for (const entry of text.split(',').map((part) => part.trim()).filter(Boolean)) {
    const origin = originOf(entry);
    if (origin === undefined) {
      ctx.addIssue({ code: 'custom', message: `"${entry}" is not an origin (scheme://host[:port], nothing after it)` });
      return z.NEVER;
    }
    origins.add(origin);
  }
  return [...origins];
});

function originOf(entry: string): string | undefined {
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return undefined;
  }
  const bare = url.pathname === '/' && url.search === '' && url.hash === '' && url.username === '' && url.password === '' && !/^[^:]+:\/\/[^/]*\/./.test(entry);
  return bare && url.origin !== 'null' ? url.origin : undefined;
}
/** `N/DURATION` (`600/1m`), within the API's bounds. */
const rateLimit = z.string().transform((text, ctx) => {
  const read = readRateLimit(text);
  const bounded = read.ok ? withinBounds(read.value) : read;
  if (!bounded.ok) {
    ctx.addIssue({ code: 'custom', message: bounded.problem });
    return z.NEVER;
  }
  return bounded.value;
});
const optional = <T extends z.ZodType>(schema: T) => schema.optional();

/** Every environment variable Gatehouse reads, with its default; see docs/configuration.md. An empty value counts as unset. */
export const envSchema = z.object({
  PORT: port.default(DEFAULTS.PORT),
  HOST: z.string().min(1).default(DEFAULTS.HOST),
  OPS_PORT: port.default(DEFAULTS.OPS_PORT),
  UPSTREAM_URL: url(['http:', 'https:']).default(DEFAULTS.UPSTREAM_URL),
  UPSTREAM_TIMEOUT: duration(parseDurationMs).prefault(DEFAULTS.UPSTREAM_TIMEOUT),
  DATABASE_URL: optional(url(['postgres:', 'postgresql:'])),
  DATA_DIR: z.string().min(1).default(DEFAULTS.DATA_DIR),
  CONFIG_DIR: z.string().min(1).default(DEFAULTS.CONFIG_DIR),
  REDIS_URL: optional(url(['redis:', 'rediss:'])),
  /** A Redis that has not answered within this is down, for every use (docs/replicas.md, "A Redis that does not answer"). */
  REDIS_COMMAND_TIMEOUT: duration(parseDurationMs).prefault(DEFAULTS.REDIS_COMMAND_TIMEOUT),
  ADMIN_EMAIL: optional(z.string().email('must be an email address')),
  ADMIN_PASSWORD: optional(z.string().min(8, 'must be at least 8 characters')),
  ADMIN_SESSION_TTL: duration(parseDurationSeconds).prefault(DEFAULTS.ADMIN_SESSION_TTL),
  JWT_SECRET: optional(z.string().min(32, 'must be at least 32 characters')),
  LICENSE_API_KEYS: optional(z.coerce.number().int().min(0)),
  LICENSE_FEATURES: featureList.prefault(''),
  MCP_PATH: mcpPath.default(DEFAULTS.MCP_PATH),
  MCP_SSE_PATH: optional(mcpPath),
  MCP_MESSAGES_PATH: optional(mcpPath),
  /** Browser origins allowed on the MCP paths; a request with any other `Origin` is 403 (DNS rebinding). */
  MCP_ALLOWED_ORIGINS: originList.prefault(''),
  FORWARD_AUTHORIZATION: bool.default(false),
  /** The rate limit a new key gets when its create body names none (docs/api-keys.md, "Rate limits"). */
  DEFAULT_KEY_RATE_LIMIT: optional(rateLimit),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default(DEFAULTS.LOG_LEVEL),
  BODY_LIMIT: positiveInt.default(DEFAULTS.BODY_LIMIT),
  KEY_CACHE_SIZE: positiveInt.default(DEFAULTS.KEY_CACHE_SIZE),
  KEY_CACHE_TTL: duration(parseDurationMs).prefault(DEFAULTS.KEY_CACHE_TTL),
  ARGON2_MEMORY_KIB: positiveInt.default(DEFAULTS.ARGON2_MEMORY_KIB),
  ARGON2_TIME_COST: positiveInt.default(DEFAULTS.ARGON2_TIME_COST),
  ARGON2_PARALLELISM: positiveInt.default(DEFAULTS.ARGON2_PARALLELISM),
  ARGON2_CONCURRENCY: positiveInt.default(DEFAULTS.ARGON2_CONCURRENCY),
  /** Request headers must arrive within this (slowloris); then the connection is closed (408). */
  HEADERS_TIMEOUT: duration(parseDurationMs).prefault(DEFAULTS.HEADERS_TIMEOUT),
  /** A whole request (headers and body) must arrive within this; then the connection is closed (408). */
  REQUEST_TIMEOUT: duration(parseDurationMs).prefault(DEFAULTS.REQUEST_TIMEOUT),
  /** An idle keep-alive connection is closed after this. */
  KEEP_ALIVE_TIMEOUT: duration(parseDurationMs).prefault(DEFAULTS.KEEP_ALIVE_TIMEOUT),
  /** Client connections open at once on the public port; more are closed as they arrive. */
  MAX_CONNECTIONS: positiveInt.default(DEFAULTS.MAX_CONNECTIONS),
  /** Long-lived answers (event streams, WebSocket tunnels) one credential may hold open at once. */
  MAX_STREAMS_PER_KEY: positiveInt.default(DEFAULTS.MAX_STREAMS_PER_KEY),
  /** Messages in one JSON-RPC batch on the MCP paths; more is one 400. */
  MCP_MAX_BATCH: positiveInt.default(DEFAULTS.MCP_MAX_BATCH),
  /** `GET /api/v1/openapi.json` on the public port, without credentials. */
  OPENAPI_ENABLED: bool.default(true),
  /** The API reference page at `/docs` (needs OPENAPI_ENABLED: it renders that document). */
  DOCS_ENABLED: bool.default(true),
});

export type Env = z.output<typeof envSchema>;
/** Variables whose values are secrets: never logged, masked when printed. */
export const SECRET_VARIABLES = ['ADMIN_PASSWORD', 'JWT_SECRET', 'DATABASE_URL', 'REDIS_URL'] as const;
