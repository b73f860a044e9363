import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';

/** Exit codes of every command: done, refused (bad input, licence, unknown id, bad config), wrong usage. */
export const EXIT_OK = 0;
export const EXIT_REFUSED = 1;
export const EXIT_USAGE = 2;

/** What a command reads and writes; the process's own streams, or a test's. */
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown };
  env: Record<string, string | undefined>;
}

export interface Command {
  /** `keys create`: the words that select it. */
  name: string;
  summary: string;
  /** The arguments after the name, for the usage line: `<id>`, `--email <email>`. */
  synopsis: string;
  /** More lines for `--help`: what it does, what it prints, what to know. */
  description: string[];
  options: ParseArgsOptionsConfig;
  /** Help text of each option, by name. */
  optionHelp: Record<string, string>;
  positionals?: { min: number; max: number };
  run(io: CliIo, args: ParsedArgs): Promise<number | 'running'>;
}

export interface ParsedArgs {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

/** Wrong usage: an unknown command or option, a missing or malformed argument. Exit 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A refusal the CLI itself decides (an admin that exists already, passwords that differ). Exit 1. */
export class RefusedError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'RefusedError';
    this.code = code;
  }
}

/** Options every command takes. */
export const COMMON_OPTIONS: ParseArgsOptionsConfig = {
  help: { type: 'boolean', short: 'h' },
};

export function parseCommandArgs(command: Command, argv: string[]): ParsedArgs {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...COMMON_OPTIONS, ...command.options }, strict: true, allowPositionals: true });
  } catch (error) {
    // parseArgs's messages name the option and say what is wrong; its hint about `--` is noise here.
    throw new UsageError((error as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
  }
  const values = parsed.values as ParsedArgs['values'];
  if (values.help) return { values, positionals: parsed.positionals };
  const { min, max } = command.positionals ?? { min: 0, max: 0 };
  if (parsed.positionals.length > max) throw new UsageError(`unexpected argument '${parsed.positionals[max]}'`);
  if (parsed.positionals.length < min) throw new UsageError(`missing argument: ${command.synopsis}`);
  return { values, positionals: parsed.positionals };
}

export function commandHelp(command: Command): string {
  const lines = [`Usage: gatehouse ${command.name} ${command.synopsis}`.trimEnd(), '', command.summary];
  if (command.description.length) lines.push('', ...command.description);
  const options = Object.entries({ ...command.options, ...COMMON_OPTIONS }).map(([name, option]) => {
    const flag = `${option.short ? `-${option.short}, ` : '    '}--${name}${option.type === 'string' ? ' <value>' : ''}`;
    const help = name === 'help' ? 'show this help' : (command.optionHelp[name] ?? '');
    return [flag, help + (option.multiple ? ' (repeatable)' : '')] as const;
  });
  const width = Math.max(...options.map(([flag]) => flag.length)) + 2;
  lines.push('', 'Options:', ...options.map(([flag, help]) => `  ${flag.padEnd(width)}${help}`));
  return lines.join('\n') + '\n';
}

export function stringValue(args: ParsedArgs, name: string): string | undefined {
  const value = args.values[name];
  return typeof value === 'string' ? value : undefined;
}

export function requiredString(args: ParsedArgs, name: string): string {
  const value = stringValue(args, name);
  if (value === undefined) throw new UsageError(`missing option --${name}`);
  return value;
}

export function stringList(args: ParsedArgs, name: string): string[] | undefined {
  const value = args.values[name];
  return Array.isArray(value) ? value : undefined;
}
