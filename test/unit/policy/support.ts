import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse, stringify } from 'yaml';
import { loadTables, MCP_TOOLS_FILE, ROUTES_FILE } from '../../../src/config/tables.ts';
import type { TablePaths, Tables } from '../../../src/config/tables.ts';
import type { ApiKeyPrincipal } from '../../../src/policy/principal.ts';
import type { RateRule } from '../../../src/policy/rate-limits.ts';

/** The shipped `config/` directory: the defaults of docs/configuration.md. */
export const CONFIG_DIR = resolve(import.meta.dirname, '../../../config');

export const DEFAULT_PATHS: TablePaths = { mcpPath: '/mcp' };
export const LEGACY_PATHS: TablePaths = { mcpPath: '/mcp', mcpSsePath: '/sse', mcpMessagesPath: '/messages' };

export function defaultTables(paths: TablePaths = LEGACY_PATHS): Tables {
  return loadTables(CONFIG_DIR, paths);
}

/** The shipped YAML files as plain data, to be edited by a test. */
export function defaultYaml(): { routes: Record<string, unknown>; tools: Record<string, unknown> } {
  return {
    routes: parse(readFileSync(join(CONFIG_DIR, ROUTES_FILE), 'utf8')) as Record<string, unknown>,
    tools: parse(readFileSync(join(CONFIG_DIR, MCP_TOOLS_FILE), 'utf8')) as Record<string, unknown>,
  };
}

/** Writes the two files (data is stringified, text written as is) into a fresh directory. */
export function withConfig<T>(files: { routes?: unknown; tools?: unknown }, use: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-tables-'));
  try {
    const defaults = defaultYaml();
    write(join(dir, ROUTES_FILE), files.routes === undefined ? defaults.routes : files.routes);
    write(join(dir, MCP_TOOLS_FILE), files.tools === undefined ? defaults.tools : files.tools);
    return use(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function write(file: string, content: unknown): void {
  if (content === null) return; // null: leave the file missing
  writeFileSync(file, typeof content === 'string' ? content : stringify(content));
}

/** Loads tables from edited YAML. */
export function tablesFrom(files: { routes?: unknown; tools?: unknown }, paths: TablePaths = DEFAULT_PATHS): Tables {
  return withConfig(files, (dir) => loadTables(dir, paths));
}

/** The default routes with `extra` inserted before the catch-all. */
export function routesWith(...extra: Record<string, unknown>[]): Record<string, unknown> {
  const routes = defaultYaml().routes as { scopes: string[]; routes: Record<string, unknown>[] };
  return { ...routes, routes: [...routes.routes.slice(0, -1), ...extra, routes.routes.at(-1)!] };
}

export function apiKey(
  scopes: readonly string[],
  options: { agentId?: number | null; expiresAt?: Date | null; revoked?: boolean; disabled?: boolean; rateLimit?: RateRule | null } = {},
): ApiKeyPrincipal {
  return {
    kind: 'api_key',
    keyId: 1,
    agentId: options.agentId ?? null,
    scopes,
    expiresAt: options.expiresAt ?? null,
    revoked: options.revoked ?? false,
    disabled: options.disabled ?? false,
    rateLimit: options.rateLimit ?? null,
  };
}

export const ALL_FEATURES: ReadonlySet<string> = new Set(['events', 'recall', 'custom_tools', 'orchestrate']);
export const NO_FEATURES: ReadonlySet<string> = new Set();
