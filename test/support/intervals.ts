/**
 * The most of `times` (sorted) that any interval [t, t + `ms`) holds: what a rate limit's
 * promise is checked against, "at most `requests` in any interval of `per_seconds`".
 */
export function densest(times: readonly number[], ms: number): number {
  let most = 0;
  let start = 0;
  for (let end = 0; end < times.length; end++) {
    while (times[end]! - times[start]! >= ms) start++;
    most = Math.max(most, end - start + 1);
  }
  return most;
}
