/**
 * `tools/list` results are filtered to the tools the key may call (docs/mcp.md, "What
 * is inspected"). A result is recognised by its shape, not by remembering request ids:
 * a JSON-RPC success response whose `result.tools` is an array. That also covers results
 * delivered on a stream other than the request's (the legacy transport answers every POST
 * on its GET stream). An entry that is not an object with a string `name` is dropped.
 *
 * Some clients match member names without case (Go's encoding/json does, folding Unicode
 * too: `ſ` reads as `s`, `K` as `k`): to them `Result`, `TOOLS` or `Name` are the members
 * this filter reads. A message spelling `result` or `tools` another way is `ambiguous` (the
 * caller refuses it), and a tool entry spelling `name` another way is dropped.
 */

/** How a message carries a tools list: not at all, as `result.tools`, or under another spelling. */
export type ToolsListShape = 'none' | 'list' | 'ambiguous';

export function toolsListShape(message: unknown): ToolsListShape {
  if (!isPlainObject(message)) return 'none';
  if (hasCaseVariant(message, 'result')) return 'ambiguous';
  const { result } = message;
  if (!isPlainObject(result)) return 'none';
  if (hasCaseVariant(result, 'tools')) return 'ambiguous';
  return Array.isArray(result.tools) ? 'list' : 'none';
}

/** Told of the tools a list passes on (the mirrored parameters of their schemas are learnt from them). */
export type ToolsSeen = (tools: readonly unknown[]) => void;

/**
 * The message (or batch) with every `result.tools` filtered; the same value when nothing
 * changed. A list answered to one key is that key's alone: where the revision has cache
 * hints (2026-07-28, `cacheScope`), the result is marked `private`, so that no shared cache
 * serves it to another.
 */
export function filterToolsList(value: unknown, allowed: ReadonlySet<string>, seen?: ToolsSeen): unknown {
  if (Array.isArray(value)) {
    let changed = false;
    const filtered = value.map((element) => {
      const next = filterMessage(element, allowed, seen);
      if (next !== element) changed = true;
      return next;
    });
    return changed ? filtered : value;
  }
  return filterMessage(value, allowed, seen);
}

function filterMessage(message: unknown, allowed: ReadonlySet<string>, seen: ToolsSeen | undefined): unknown {
  if (!isPlainObject(message) || !isPlainObject(message.result)) return message;
  const { result } = message;
  const { tools } = result;
  if (!Array.isArray(tools)) return message;
  const kept = tools.filter((tool) => isPlainObject(tool) && typeof tool.name === 'string' && allowed.has(tool.name) && !hasCaseVariant(tool, 'name'));
  seen?.(kept);
  const hinted = hasCacheHints(result) && result.cacheScope !== 'private';
  if (kept.length === tools.length && !hinted) return message;
  return { ...message, result: hinted ? { ...result, tools: kept, cacheScope: 'private' } : { ...result, tools: kept } };
}

/** A result of a revision with cache hints (2026-07-28: every result has `resultType`, a cacheable one `ttlMs` and `cacheScope`). */
function hasCacheHints(result: Record<string, unknown>): boolean {
  return Object.hasOwn(result, 'cacheScope') || Object.hasOwn(result, 'ttlMs') || Object.hasOwn(result, 'resultType');
}

/** Whether `object` has a member that a case-insensitive reader takes for `name`, other than `name` itself. */
function hasCaseVariant(object: Record<string, unknown>, name: string): boolean {
  for (const key in object) {
    if (key.length === name.length && key !== name && (key.toLowerCase() === name || key.toUpperCase() === name.toUpperCase())) return true;
  }
  return false;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
