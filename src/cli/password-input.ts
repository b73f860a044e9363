import { newPasswordProblem } from '../admin/password-rules.ts';
import { loginBodySchema } from '../http/auth-routes.ts';
import { RefusedError, type CliIo } from './command.ts';

/**
 * A password from standard input: typed at a prompt without echo when it is a terminal
 * (twice, when `confirm`), else the first line of what is piped in (`printf '%s\n' "$PW" |`),
 * so it never has to be on the command line, where `ps` and shell history would see it.
 */
export async function readPassword(io: CliIo, options: { confirm: boolean }): Promise<string> {
  if (io.stdin.isTTY) {
    const password = await promptHidden(io, 'Password: ');
    if (options.confirm && (await promptHidden(io, 'Repeat password: ')) !== password) {
      throw new RefusedError('validation_failed', 'the two passwords differ');
    }
    return password;
  }
  const text = await readAll(io.stdin);
  const password = text.split(/\r?\n/, 1)[0] ?? '';
  if (password === '') throw new RefusedError('validation_failed', 'no password: type it at the prompt, or pipe it to standard input');
  return password;
}

/** The rules a new admin password must meet: the API's (`newPasswordProblem`), and short enough to log in with. */
export function checkAdminPassword(password: string): void {
  const rule = newPasswordProblem(password);
  if (rule !== undefined) throw new RefusedError('validation_failed', `password: ${rule}`);
  const result = loginBodySchema.shape.password.safeParse(password);
  if (!result.success) throw new RefusedError('validation_failed', `password: ${result.error.issues[0]!.message}`);
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}

function promptHidden(io: CliIo, prompt: string): Promise<string> {
  const input = io.stdin;
  return new Promise((resolve, reject) => {
    let value = '';
    const finish = () => {
      input.off('data', onData);
      input.setRawMode?.(false);
      input.pause();
      io.stderr.write('\n');
    };
    const onData = (chunk: Buffer | string) => {
      for (const char of chunk.toString()) {
        if (char === '\r' || char === '\n' || char === '\u0004') {
          finish();
          resolve(value);
          return;
        }
        if (char === '\u0003') {
          finish();
          reject(new RefusedError('interrupted', 'interrupted'));
          return;
        }
        value = char === '\u007f' || char === '\b' ? [...value].slice(0, -1).join('') : value + char;
      }
    };
    io.stderr.write(prompt);
    input.setRawMode?.(true);
    input.on('data', onData);
    input.resume();
  });
}
