import { envSchema } from '../config/env.ts';
import { ConfigError } from '../config/load.ts';
import { EXIT_OK, type Command } from './command.ts';
import { hasherFor } from './context.ts';
import { printJson } from './output.ts';
import { readPassword } from './password-input.ts';

export const hashPassword: Command = {
  name: 'hash-password',
  summary: 'Print the argon2id hash of a password, with the configured ARGON2_* parameters.',
  synopsis: '[--json]',
  description: [
    'The password is read from a prompt without echo when stdin is a terminal, otherwise from',
    'the first line of stdin (printf \'%s\\n\' "$PASSWORD" | gatehouse hash-password). It is',
    'never taken from the command line. Prints the PHC string ($argon2id$v=19$m=…).',
  ],
  options: { json: { type: 'boolean' } },
  optionHelp: { json: 'print JSON: {"hash": …}' },
  async run(io, args) {
    // Only the ARGON2_* variables matter here: the config/ tables need not be present.
    const present = Object.fromEntries(Object.entries(io.env).filter(([name, value]) => name.startsWith('ARGON2_') && value));
    const parsed = envSchema.safeParse(present);
    if (!parsed.success) throw new ConfigError(`${String(parsed.error.issues[0]!.path[0])}: ${parsed.error.issues[0]!.message}`);
    const password = await readPassword(io, { confirm: io.stdin.isTTY === true });
    const hash = await hasherFor({ env: parsed.data }).hash(password);
    if (args.values.json) printJson(io, { hash });
    else io.stdout.write(`${hash}\n`);
    return EXIT_OK;
  },
};
