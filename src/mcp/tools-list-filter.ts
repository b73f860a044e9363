/**
 * `tools/list` results are filtered to the tools the key may call (interface.md, "MCP
 * tools and scopes"). A result is recognised by its shape, not by remembering request ids:
 * a JSON-RPC success response whose `result.tools` is an array. That also covers results
 * delivered on a stream other than the request's (the legacy transport answers every POST
 * on its GET stream). An entry that is not an object with a string `name` is dropped.
 */

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

/** True when the message (or an element of the batch) is a response carrying a `result.tools` array. */
export function carriesToolsList(value: unknown): boolean {
  return Array.isArray(value) ? value.some(isToolsListResult) : isToolsListResult(value);
}

function isToolsListResult(message: unknown): boolean {
  return isPlainObject(message) && isPlainObject(message.result) && Array.isArray(message.result.tools);
}

function filterMessage(message: unknown, allowed: ReadonlySet<string>): unknown {
  if (!isPlainObject(message) || !isPlainObject(message.result)) return message;
  const { tools } = message.result;
  if (!Array.isArray(tools)) return message;
  const kept = tools.filter((tool) => isPlainObject(tool) && typeof tool.name === 'string' && allowed.has(tool.name));
  if (kept.length === tools.length) return message;
  return { ...message, result: { ...message.result, tools: kept } };
}

/**
 * A whole `application/json` response body, filtered and re-serialised (so the client reads
 * exactly what was filtered, whatever its parser makes of duplicate keys). Undefined when it
 * is not JSON: the caller refuses to pass on what it could not inspect.
 */
export function filterToolsListJson(text: string, allowed: ReadonlySet<string>): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return JSON.stringify(filterToolsList(value, allowed));
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
