/**
 * True for a command that outlived `commandTimeout` (ioredis rejects it with this message, see
 * ioredis built/Command.js). Such a command may well have run: under the very burst being
 * limited, a busy event loop reads Redis's answer after the timer fired. A Redis that is away
 * fails differently and at once (no offline queue), so the two can be told apart.
 */
export function isLateAnswer(error: unknown): boolean {
  return error instanceof Error && error.message === 'Command timed out';
}
