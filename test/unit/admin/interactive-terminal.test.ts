import { describe, expect, it } from 'vitest';
import { interactiveTerminal } from '../../../src/admin/interactive-terminal.ts';

function output(isTTY: boolean | undefined) {
  const written: string[] = [];
  return { isTTY, written, write: (text: string) => written.push(text) };
}

describe('interactiveTerminal: where a generated password may be shown', () => {
  it('writes to stdout when stdin and stdout are both TTYs (a shell)', () => {
    const stdout = output(true);
    const show = interactiveTerminal({ isTTY: true }, stdout);
    expect(show).toBeTypeOf('function');
    show?.(['  password: p4ss', '']);
    expect(stdout.written).toEqual(['  password: p4ss\n\n']);
  });

  it.each([
    ['a TTY on stdout only (docker run -t, compose or Kubernetes tty: true: recorded as the log)', false, true],
    ['a TTY on stdin only (output piped to a file or a log shipper)', true, false],
    ['no TTY at all (systemd, a pipe)', undefined, undefined],
  ])('never with %s', (_case, stdinTty, stdoutTty) => {
    const stdout = output(stdoutTty);
    expect(interactiveTerminal({ isTTY: stdinTty }, stdout)).toBeUndefined();
    expect(stdout.written).toEqual([]);
  });
});
