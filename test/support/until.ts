/**
 * Waits for `condition` to hold, polling it, and fails once `timeoutMs` has passed without it
 * (CONTRIBUTING.md, "Tests on a busy machine"). What a test waits for is a condition, never a
 * time: the deadline only turns a condition that never comes into a failure instead of a hang,
 * so it is generous, and a loaded machine only makes the wait longer, never the test wrong.
 */
export async function until(condition: () => boolean | Promise<boolean>, what = 'the condition', timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
