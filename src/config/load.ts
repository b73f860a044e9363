import { resolve } from 'node:path';
import { envSchema, type Env, type LicensedFeature } from './env.ts';
import { knownScopes, loadTables, type Tables } from './tables.ts';

/** Everything the gateway is configured with: parsed once at start, typed, frozen. */
export interface Config {
  env: Env;
  tables: Tables;
  /** Every scope a key may be granted: the route table's and the MCP tool table's. */
  knownScopes: ReadonlySet<string>;
  licence: { apiKeys: number | null; features: ReadonlySet<LicensedFeature> };
}

/** A bad setting: the message names the variable or file and says what is wrong, on one line. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export function loadConfig(source: Record<string, string | undefined>): Config {
  const present = Object.fromEntries(Object.entries(source).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`${variable}: ${issue.message}`);
  }
  const env = parsed.data;
  if (env.HEADERS_TIMEOUT > env.REQUEST_TIMEOUT) {
    // Node refuses a server whose header deadline outlasts the whole request's.
    throw new ConfigError('HEADERS_TIMEOUT: must not be longer than REQUEST_TIMEOUT');
  }
  if (env.PORT === env.OPS_PORT && env.PORT !== 0) {
    // Said as such: listening would otherwise report OPS_PORT's port as taken, by ourselves.
    throw new ConfigError(`PORT and OPS_PORT: both are ${env.PORT}; the health and metrics listener needs a port of its own`);
  }
  if (Boolean(env.MCP_SSE_PATH) !== Boolean(env.MCP_MESSAGES_PATH)) {
    throw new ConfigError('MCP_SSE_PATH and MCP_MESSAGES_PATH: set both or neither');
  }
  let tables: Tables;
  try {
    tables = loadTables(resolve(env.CONFIG_DIR), {
      mcpPath: env.MCP_PATH,
      mcpSsePath: env.MCP_SSE_PATH,
      mcpMessagesPath: env.MCP_MESSAGES_PATH,
    });
  } catch (error) {
    throw new ConfigError(`CONFIG_DIR: ${(error as Error).message}`);
  }
  return deepFreeze({
    env,
    tables,
    knownScopes: knownScopes(tables),
    licence: { apiKeys: env.LICENSE_API_KEYS ?? null, features: new Set(env.LICENSE_FEATURES) },
  });
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
