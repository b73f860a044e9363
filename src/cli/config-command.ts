import { resolve } from 'node:path';
import { SECRET_VARIABLES, envSchema, type Env } from '../config/env.ts';
import { loadConfig, type Config } from '../config/load.ts';
import { describeMisspelling, misspelledVariables } from '../config/misspelled-variables.ts';
import { MCP_TOOLS_FILE, ROUTES_FILE } from '../config/tables.ts';
import { redactDatabaseUrl } from '../store/database-url.ts';
import { EXIT_OK, type Command } from './command.ts';
import { printJson, printTable } from './output.ts';

/** Parsed durations are numbers; say in which unit. */
const UNITS: Partial<Record<keyof Env, string>> = { UPSTREAM_TIMEOUT: 'ms', KEY_CACHE_TTL: 'ms', ADMIN_SESSION_TTL: 's', BODY_LIMIT: 'bytes' };
const SECRETS: ReadonlySet<string> = new Set(SECRET_VARIABLES);

export const configCheck: Command = {
  name: 'config check',
  summary: 'Validate the environment and the config/ tables, and print the effective configuration.',
  synopsis: '[--json]',
  description: [
    'Reads exactly what `gatehouse serve` reads. A bad value is one line naming the variable or',
    'file, and exit 1. Secrets (ADMIN_PASSWORD, JWT_SECRET, the passwords in DATABASE_URL and',
    'REDIS_URL) are masked. The store is not opened. A variable that looks like a mistyped one of',
    'Gatehouse\'s (PROT for PORT) is named in a warning, as `serve` does at start.',
  ],
  options: { json: { type: 'boolean' } },
  optionHelp: { json: 'print JSON' },
  async run(io, args) {
    const config = loadConfig(io.env);
    const effective = effectiveConfig(config, io.env);
    if (args.values.json) {
      printJson(io, effective);
      return EXIT_OK;
    }
    io.stdout.write(`configuration is valid (${config.tables.routes.length} routes, ${config.tables.mcp.tools.size} MCP tools)\n`);
    for (const warning of effective.warnings) io.stdout.write(`warning: ${warning.message}\n`);
    io.stdout.write('\nenvironment:\n');
    printTable(io, ['VARIABLE', 'VALUE', 'FROM'], effective.environment.map((entry) => [entry.name, entry.value, entry.source]));
    io.stdout.write(`\nroutes (${effective.files.routes}):\n`);
    printTable(
      io,
      ['NAME', 'PATH', 'METHODS', 'CREDENTIAL', 'SCOPE'],
      effective.routes.map((route) => [route.name, route.path, route.methods, route.credential, route.scope ?? route.mcp ?? null]),
    );
    io.stdout.write(`\nMCP tools (${effective.files.mcp_tools}):\n`);
    printTable(
      io,
      ['TOOL', 'SCOPE', 'LICENSED FEATURE', 'RATE LIMIT PER KEY'],
      effective.mcp_tools.map((tool) => [tool.name, tool.scope, tool.feature, tool.rate_limit === null ? null : `${tool.rate_limit.requests} per ${tool.rate_limit.per_seconds} s`]),
    );
    io.stdout.write(
      `\nscopes a key may be granted: ${effective.known_scopes.join(' ')}\n` +
        `licence: api_keys ${effective.licence.api_keys ?? 'no cap'}; features ${effective.licence.features.join(', ') || 'none'}\n`,
    );
    return EXIT_OK;
  },
};

/** A parsed value as read back by people: a list comma-separated, a rate limit as `N per S s`. */
function shown(value: Env[keyof Env]): string {
  if (Array.isArray(value)) return value.join(',');
  if (typeof value === 'object' && value !== null && 'requests' in value) return `${value.requests} per ${value.perSeconds} s`;
  return String(value);
}

/** The configuration as `serve` would run with it, secrets masked; what `config check` prints. */
export function effectiveConfig(config: Config, source: Record<string, string | undefined>) {
  const environment = Object.keys(envSchema.shape).map((name) => {
    const value = config.env[name as keyof Env];
    const set = source[name] !== undefined && source[name] !== '';
    const unit = UNITS[name as keyof Env];
    return {
      name,
      value: value === undefined ? null : SECRETS.has(name) ? mask(String(value)) : `${shown(value)}${unit ? ` ${unit}` : ''}`,
      source: set ? 'env' : value === undefined ? 'unset' : 'default',
    };
  });
  const configDir = resolve(config.env.CONFIG_DIR);
  return {
    valid: true,
    // What `serve` warns of at start: variables that look like a mistyped one of ours (names only).
    warnings: misspelledVariables(source).map((misspelling) => ({ ...misspelling, message: describeMisspelling(misspelling) })),
    environment,
    files: { routes: resolve(configDir, ROUTES_FILE), mcp_tools: resolve(configDir, MCP_TOOLS_FILE) },
    routes: config.tables.routes.map((route) => ({
      name: route.name,
      path: route.path,
      methods: route.methods === '*' ? '*' : route.methods.join(','),
      credential: route.credential,
      scope: route.scope ?? null,
      mcp: route.mcp ?? null,
    })),
    mcp_tools: [...config.tables.mcp.tools.values()].map((tool) => {
      const limit = config.tables.mcp.limits.get(tool.name);
      return { name: tool.name, scope: tool.scope, feature: tool.feature ?? null, rate_limit: limit === undefined ? null : { requests: limit.requests, per_seconds: limit.perSeconds } };
    }),
    known_scopes: [...config.knownScopes].sort(),
    licence: { api_keys: config.licence.apiKeys, features: [...config.licence.features] },
  };
}

/** A URL keeps its shape with the password masked (`postgres://gh:***@db/gh`); anything else is masked whole. */
function mask(value: string): string {
  try {
    if (!new URL(value).host) return '***';
    return redactDatabaseUrl(value);
  } catch {
    return '***';
  }
}
