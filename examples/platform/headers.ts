/** Header values as received, lower-case names; repeated values joined with `, ` (as HTTP folds them). */
export function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | undefined> {
  const flat: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(headers)) {
    flat[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return flat;
}

/** The headers whose name starts with `prefix` (lower-case), e.g. the gateway's `x-auth-` identity headers. */
export function headersWithPrefix(headers: Record<string, string | undefined>, prefix: string): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => name.startsWith(prefix)));
}
