import { LRUCache } from 'lru-cache';
import type { ParamHeader, ToolHeaderLookup } from '../policy/mcp-headers.ts';

/**
 * Where replicas share what each learnt (Redis): a client may list the tools through one
 * replica and call through another. Values are `serialise`d entries.
 */
export interface SharedToolSchemas {
  publish(entries: ReadonlyArray<readonly [tool: string, value: string]>): void;
  /** The tool's entry, or undefined when no replica has learnt it (or the store cannot be asked). */
  fetch(tool: string): Promise<string | undefined>;
}

/** Tools whose mirrored parameters are remembered; past it the least recently used are forgotten (and learnt again from the next list). */
const DEFAULT_MAX_TOOLS = 10_000;
/** An `x-mcp-header` name: an RFC 9110 token. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** How deep `properties` are followed: argument paths are short, and a schema from the tool server is not walked without end. */
const MAX_DEPTH = 16;
/** Mirrored arguments one tool may have; more makes its schema invalid (each is a header on every call). */
const MAX_HEADERS = 64;

/**
 * The `x-mcp-header` annotations of the tools, learnt from the `tools/list` answers the
 * gateway relays (and filters) on their way to clients: the tool server's own word on which
 * argument each `Mcp-Param-{Name}` header mirrors (2026-07-28, server/tools, "x-mcp-header").
 * A tool whose schema breaks the revision's rules for them (a name that is not a token, one
 * name twice) is remembered as unknown: clients must not call it with those headers.
 */
export class ToolParamHeaders implements ToolHeaderLookup {
  readonly #tools: LRUCache<string, Learnt>;
  readonly #shared: SharedToolSchemas | undefined;
  /** The tool table's tools: only those are ever called, so only those are worth asking another replica about. */
  readonly #callable: ReadonlySet<string> | undefined;

  constructor(options: { maxTools?: number; shared?: SharedToolSchemas | undefined; callable?: ReadonlySet<string> } = {}) {
    this.#tools = new LRUCache({ max: options.maxTools ?? DEFAULT_MAX_TOOLS });
    this.#shared = options.shared;
    this.#callable = options.callable;
  }

  /** Read by `decide()`: a peek, which leaves the cache as it is. */
  paramHeadersOf(tool: string): readonly ParamHeader[] | 'invalid' | undefined {
    const known = this.#tools.peek(tool);
    return known === undefined || known === UNSEEN ? undefined : known.headers;
  }

  /** The entries of a `tools/list` result's `tools` (each as the tool server sent it); what changed is shared. */
  learn(tools: readonly unknown[]): void {
    const changed: Array<readonly [string, string]> = [];
    for (const tool of tools) {
      if (!isObject(tool) || typeof tool.name !== 'string') continue;
      const headers = paramHeadersIn(tool.inputSchema) ?? 'invalid';
      const json = JSON.stringify(headers);
      const known = this.#tools.get(tool.name);
      if (known !== undefined && known !== UNSEEN && known.json === json) continue;
      this.#tools.set(tool.name, { headers, json });
      changed.push([tool.name, json]);
    }
    if (changed.length > 0) this.#shared?.publish(changed);
  }

  /** True when another replica may know a tool of the table this one has not seen listed (nor asked about lately). */
  mayRecall(tool: string): boolean {
    return this.#shared !== undefined && (this.#callable === undefined || this.#callable.has(tool)) && !this.#tools.has(tool);
  }

  /** Takes what another replica learnt of `tool`, if any; never rejects (the call is then refused as unseen). */
  async recall(tool: string): Promise<void> {
    const value = await this.#shared?.fetch(tool);
    const headers = value === undefined ? undefined : parseShared(value);
    if (headers === undefined) this.#tools.set(tool, UNSEEN, { ttl: UNSEEN_TTL_MS });
    else this.#tools.set(tool, { headers, json: value! });
  }
}

interface Known {
  readonly headers: readonly ParamHeader[] | 'invalid';
  /** As shared: a list that says the same again is not published again. */
  readonly json: string;
}

/** A tool no replica had learnt when asked: not asked again for a few seconds, so a flood of such calls costs Redis nothing. */
const UNSEEN = 'unseen';
const UNSEEN_TTL_MS = 5_000;

type Learnt = Known | typeof UNSEEN;

/** An entry as another replica published it; undefined when it is not one. */
function parseShared(value: string): readonly ParamHeader[] | 'invalid' | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (parsed === 'invalid') return parsed;
  if (!Array.isArray(parsed)) return undefined;
  const valid = parsed.every(
    (entry: unknown) => isObject(entry) && typeof entry.name === 'string' && Array.isArray(entry.path) && entry.path.every((key: unknown) => typeof key === 'string'),
  );
  return valid ? Object.freeze(parsed as ParamHeader[]) : undefined;
}

/** Every annotated property of the schema, by its chain of `properties` keys; undefined when an annotation is invalid. */
function paramHeadersIn(schema: unknown): readonly ParamHeader[] | undefined {
  const found: ParamHeader[] = [];
  const names = new Set<string>();
  const walk = (node: unknown, path: readonly string[]): boolean => {
    if (!isObject(node) || !isObject(node.properties) || path.length >= MAX_DEPTH) return true;
    for (const [key, property] of Object.entries(node.properties)) {
      if (!isObject(property)) continue;
      const header = property['x-mcp-header'];
      if (header !== undefined) {
        if (typeof header !== 'string' || !TOKEN.test(header)) return false;
        const name = header.toLowerCase();
        if (names.has(name) || names.size >= MAX_HEADERS) return false;
        names.add(name);
        found.push(Object.freeze({ name, path: Object.freeze([...path, key]) }));
      }
      if (!walk(property, [...path, key])) return false;
    }
    return true;
  };
  return walk(schema, []) ? Object.freeze(found) : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
