import { INITIAL_PASSWORD_FILE, InitialPasswordFile } from '../admin/initial-password-file.ts';
import { MIN_PASSWORD_LENGTH } from '../admin/password-rules.ts';
import { SessionService } from '../admin/session-service.ts';
import { withRevocations } from './revocations.ts';
import { envSchema } from '../config/env.ts';
import { loginBodySchema } from '../http/auth-routes.ts';
import type { AdminRow } from '../store/store.ts';
import { EXIT_OK, RefusedError, requiredString, type CliIo, type Command } from './command.ts';
import { withStore } from './context.ts';
import { printJson, printTable } from './output.ts';
import { checkAdminPassword, readPassword } from './password-input.ts';

const PASSWORD_HELP = [
  'The password is read from a prompt without echo (twice) when stdin is a terminal, otherwise',
  'from the first line of stdin: printf \'%s\\n\' "$PASSWORD" | gatehouse admin …',
  `It must be at least ${MIN_PASSWORD_LENGTH} characters, as the API asks of a new password.`,
];

/** An admin as the CLI shows it: never the password hash. */
function adminRecord(admin: AdminRow) {
  return { id: admin.id, email: admin.email, created_at: admin.createdAt.toISOString() };
}

/** An email as a login looks it up (what a store cannot hold is refused before any query); a new one is also an ADMIN_EMAIL. */
function checkEmail(email: string, options: { new: boolean }): void {
  const schemas = options.new ? [loginBodySchema.shape.email, envSchema.shape.ADMIN_EMAIL] : [loginBodySchema.shape.email];
  for (const schema of schemas) {
    const result = schema.safeParse(email);
    if (!result.success) throw new RefusedError('validation_failed', `email: ${result.error.issues[0]!.message}`);
  }
}

async function newPassword(io: CliIo): Promise<string> {
  const password = await readPassword(io, { confirm: true });
  checkAdminPassword(password);
  return password;
}

export const adminAdd: Command = {
  name: 'admin add',
  summary: 'Create an admin account in the configured store.',
  synopsis: '--email <email> [--json]',
  description: [...PASSWORD_HELP, 'An existing email (case-insensitive) is refused: use admin reset-password.'],
  options: { email: { type: 'string' }, json: { type: 'boolean' } },
  optionHelp: { email: 'the admin\'s email, used to log in (required)', json: 'print JSON' },
  async run(io, args) {
    const email = requiredString(args, 'email');
    checkEmail(email, { new: true });
    const password = await newPassword(io);
    return withStore(io.env, async (context) => {
      const hash = await context.hasher.hash(password);
      const { admin, created } = await context.store.createAdmin(email, hash, context.auditOf('admin_created'));
      if (!created) throw new RefusedError('admin_exists', `an admin ${admin.email} exists already; use 'gatehouse admin reset-password'`);
      if (args.values.json) printJson(io, adminRecord(admin));
      else io.stdout.write(`created admin ${admin.id} ${admin.email}\n`);
      return EXIT_OK;
    });
  },
};

export const adminResetPassword: Command = {
  name: 'admin reset-password',
  summary: 'Set a new password for an admin (break-glass: no old password needed).',
  synopsis: '--email <email> [--json]',
  description: [
    ...PASSWORD_HELP,
    `The first admin's generated password file (DATA_DIR/${INITIAL_PASSWORD_FILE}) is removed if it held this admin's password.`,
    'Every session of that admin is ended: its tokens are refused (401 revoked_credential), by',
    'every running gateway before the command exits with REDIS_URL set, within KEY_CACHE_TTL',
    'without it (a gateway on PostgreSQL re-reads the ended sessions that often).',
  ],
  options: { email: { type: 'string' }, json: { type: 'boolean' } },
  optionHelp: { email: 'the admin whose password to set (required)', json: 'print JSON' },
  async run(io, args) {
    const email = requiredString(args, 'email');
    checkEmail(email, { new: false });
    return withStore(io.env, async (context) => {
      const admin = await context.store.findAdminByEmail(email);
      if (!admin) throw new RefusedError('not_found', `no admin ${email}`);
      const password = await newPassword(io);
      await context.store.setAdminPassword(admin.id, await context.hasher.hash(password), context.auditOf('admin_password_reset'));
      // The first admin's generated password, if it was this admin's, stops working here: its file goes too.
      const initialPassword = new InitialPasswordFile(context.config.env.DATA_DIR, (error) =>
        io.stderr.write(`gatehouse: could not remove ${INITIAL_PASSWORD_FILE}: ${(error as Error).message}\n`),
      );
      await initialPassword.retire((filed) => context.hasher.verify(admin.passwordHash, filed));
      const ended = await withRevocations(io, context, (revocations) =>
        new SessionService({ store: context.store, listener: revocations.sessions, now: context.now }).endAll(admin.id, context.actor),
      );
      if (args.values.json) printJson(io, { ...adminRecord(admin), sessions_ended: ended.length });
      else io.stdout.write(`password of admin ${admin.id} ${admin.email} changed; ${ended.length} session(s) ended\n`);
      return EXIT_OK;
    });
  },
};

export const adminList: Command = {
  name: 'admin list',
  summary: 'List the admin accounts in the configured store.',
  synopsis: '[--json]',
  description: [],
  options: { json: { type: 'boolean' } },
  optionHelp: { json: 'print JSON' },
  async run(io, args) {
    return withStore(io.env, async (context) => {
      const admins = (await context.store.listAdmins()).map(adminRecord);
      if (args.values.json) printJson(io, admins);
      else printTable(io, ['ID', 'EMAIL', 'CREATED'], admins.map((admin) => [admin.id, admin.email, admin.created_at]));
      return EXIT_OK;
    });
  },
};
