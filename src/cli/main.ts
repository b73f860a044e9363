import { ConfigError } from '../config/load.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { VERSION } from '../version.ts';
import { adminAdd, adminList, adminResetPassword } from './admin-commands.ts';
import {
  EXIT_OK,
  EXIT_REFUSED,
  EXIT_USAGE,
  RefusedError,
  UsageError,
  commandHelp,
  parseCommandArgs,
  type CliIo,
  type Command,
} from './command.ts';
import { configCheck } from './config-command.ts';
import { hashPassword } from './hash-password-command.ts';
import { keysCreate, keysList, keysRevoke } from './key-commands.ts';
import { keysRotate, keysShow, keysUpdate } from './key-lifecycle-commands.ts';
import { serveCommand } from './serve-command.ts';
import { storeCopy } from './store-commands.ts';
import { storeUpgrade } from './store-upgrade-command.ts';

export const COMMANDS: readonly Command[] = [
  serveCommand,
  adminAdd,
  adminResetPassword,
  adminList,
  keysCreate,
  keysList,
  keysShow,
  keysUpdate,
  keysRotate,
  keysRevoke,
  storeCopy,
  storeUpgrade,
  configCheck,
  hashPassword,
];

const GROUPS: Record<string, string> = {
  admin: 'Admin accounts in the configured store.',
  keys: 'API keys in the configured store: the HTTP API\'s rules, for automation and break-glass.',
  store: 'The configured store as a whole.',
  config: 'The configuration.',
};

/**
 * `gatehouse <command> [options]`. Resolves with the exit code, or `'running'` when the
 * command (`serve`) keeps the process alive. Never exits the process itself.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number | 'running'> {
  const [first, second] = argv;
  if (first === undefined) {
    io.stderr.write(`gatehouse: missing command\n\n${mainHelp()}`);
    return EXIT_USAGE;
  }
  if (first === '--help' || first === '-h') return print(io, mainHelp());
  if (first === '--version' || first === '-V') return print(io, `${VERSION}\n`);
  if (first === 'help') return help(io, argv.slice(1));

  const command = findCommand(first, second);
  if (command === undefined) {
    if (first in GROUPS) {
      if (second === '--help' || second === '-h') return print(io, groupHelp(first));
      return usageError(io, second === undefined ? `'${first}' needs a command` : `unknown command '${first} ${second}'`, first);
    }
    return usageError(io, `unknown command '${first}'`);
  }
  const rest = argv.slice(command.name.split(' ').length);
  const json = rest.includes('--json');
  try {
    const args = parseCommandArgs(command, rest);
    if (args.values.help) return print(io, commandHelp(command));
    return await command.run(io, args);
  } catch (error) {
    if (error instanceof UsageError) return usageError(io, error.message, command.name);
    return refused(io, error, json);
  }
}

function findCommand(first: string, second: string | undefined): Command | undefined {
  return COMMANDS.find((command) => command.name === `${first} ${second}`) ?? COMMANDS.find((command) => command.name === first);
}

function help(io: CliIo, words: readonly string[]): number {
  if (words.length === 0) return print(io, mainHelp());
  const command = findCommand(words[0]!, words[1]);
  if (command) return print(io, commandHelp(command));
  if (words[0]! in GROUPS) return print(io, groupHelp(words[0]!));
  return usageError(io, `unknown command '${words.join(' ')}'`);
}

function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((command) => command.name.length)) + 2;
  return [
    'Usage: gatehouse <command> [options]',
    '',
    'Gatehouse, the auth gateway of the agent platform. Every command reads the same',
    'environment variables as the gateway (DATABASE_URL or DATA_DIR, CONFIG_DIR, LICENSE_*, …).',
    '',
    'Commands:',
    ...COMMANDS.map((command) => `  ${command.name.padEnd(width)}${command.summary}`),
    '',
    "Run 'gatehouse <command> --help' for a command's options.",
    'Exit codes: 0 done, 1 refused (invalid input, licence limit, unknown id, bad configuration), 2 wrong usage.',
    '',
  ].join('\n');
}

function groupHelp(group: string): string {
  const commands = COMMANDS.filter((command) => command.name.startsWith(`${group} `));
  const width = Math.max(...commands.map((command) => command.name.length)) + 2;
  return [
    `Usage: gatehouse ${group} <command> [options]`,
    '',
    GROUPS[group],
    '',
    'Commands:',
    ...commands.map((command) => `  ${command.name.padEnd(width)}${command.summary}`),
    '',
  ].join('\n');
}

function print(io: CliIo, text: string): number {
  io.stdout.write(text);
  return EXIT_OK;
}

function usageError(io: CliIo, message: string, command?: string): number {
  io.stderr.write(`gatehouse: ${message}\nRun 'gatehouse ${command ? `${command} ` : ''}--help' for usage.\n`);
  return EXIT_USAGE;
}

/** A refusal: one line on stderr and, with --json, the same as an object on stdout. */
function refused(io: CliIo, error: unknown, json: boolean): number {
  const { code, message, errors } = describeRefusal(error);
  io.stderr.write(`gatehouse: ${message}\n`);
  if (json) io.stdout.write(JSON.stringify({ error: { code, message, ...(errors ? { errors } : {}) } }, null, 2) + '\n');
  return EXIT_REFUSED;
}

function describeRefusal(error: unknown): { code: string; message: string; errors?: ReadonlyArray<{ field: string; message: string }> } {
  if (error instanceof GatewayError) return { code: error.code, message: error.message, ...(error.errors ? { errors: error.errors } : {}) };
  if (error instanceof RefusedError) return { code: error.code, message: error.message };
  if (error instanceof ConfigError) return { code: 'invalid_configuration', message: error.message };
  return { code: 'internal_error', message: `unexpected error: ${error instanceof Error ? error.message : String(error)}` };
}
