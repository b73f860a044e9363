/** What a stream says of itself: whether it is a TTY. */
export interface MaybeTty {
  isTTY?: boolean;
}

/**
 * Where a generated password may be shown: an interactive terminal, someone typing at it
 * (stdin AND stdout are TTYs), and nowhere else. A TTY on the output alone is not enough:
 * `docker run -t`, compose's and Kubernetes' `tty: true` give the container a TTY whose
 * output the runtime records as the container's log, so a password written there is in the
 * log. Such a container has no TTY on stdin unless it is also run interactively (`-i`).
 */
export function interactiveTerminal(stdin: MaybeTty, stdout: MaybeTty & { write(text: string): unknown }): ((lines: string[]) => void) | undefined {
  if (stdin.isTTY !== true || stdout.isTTY !== true) return undefined;
  return (lines) => {
    stdout.write(lines.join('\n') + '\n');
  };
}
