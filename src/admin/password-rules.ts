/**
 * The rule a new admin password must meet, in one place: the API's password change
 * (`POST /api/v1/auth/password`) and the CLI's `admin add` and `admin reset-password` apply it
 * alike, so a password one accepts the other never refuses.
 */

/** The shortest new password an admin may choose, in characters (code points). */
export const MIN_PASSWORD_LENGTH = 12;

/** What is wrong with a new password, or undefined; the message reads after the field's name. */
export function newPasswordProblem(password: string): string | undefined {
  return [...password].length < MIN_PASSWORD_LENGTH ? `must be at least ${MIN_PASSWORD_LENGTH} characters` : undefined;
}
