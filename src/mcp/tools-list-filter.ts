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

/** The message (or batch) with every `result.tools` filtered; the same value when nothing was removed. */
export function filterToolsList(value: unknown, allowed: ReadonlySet<string>): unknown {
  if (Array.isArray(value)) {
    let changed = false;
    const filtered = value.map((element) => {
      const next = filterMessage(element, allowed);
      if (next !== element) changed = true;
      return next;
    });
    return changed ? filtered : value;
  }
  return filterMessage(value, allowed);
}

function filterMessage(message: unknown, allowed: ReadonlySet<string>): unknown {
  if (!isPlainObject(message) || !isPlainObject(message.result)) return message;
  const { tools } = message.result;
  if (!Array.isArray(tools)) return message;
  const kept = tools.filter((tool) => isPlainObject(tool) && typeof tool.name === 'string' && allowed.has(tool.name) && !hasCaseVariant(tool, 'name'));
  if (kept.length === tools.length) return message;
  return { ...message, result: { ...message.result, tools: kept } };
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
