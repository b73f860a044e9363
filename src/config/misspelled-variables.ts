import { distance } from 'fastest-levenshtein';
import { envSchema } from './env.ts';

/** A variable in the environment that is not Gatehouse's but looks like a mistyped one of them. */
export interface Misspelling {
  readonly variable: string;
  readonly meant: string;
}

/** Names other programs set or read (`NODE_OPTIONS`, `npm_config_*`): never taken for a typo of ours. */
const FOREIGN_PREFIXES = ['NODE_', 'NPM_'];
/** Below this length every name is one or two edits from another (`PWD`, `TZ`, `CI`). */
const MIN_LENGTH = 4;

/**
 * Variables set in `environment` that are not Gatehouse's but are probably a misspelling of one
 * (docs/configuration.md, "Misspelled variables"): the same words in another order
 * (`PORT_OPS`), one edit away (`REDIS_URI`, `DATABSE_URL`), or two edits that swap two
 * letters (`PROT`, `REDIS_ULR`). Short names, other programs' prefixes and other two-edit
 * neighbours are left alone, so `HOME` is never taken for `HOST` nor `APP_PORT` for `OPS_PORT`. Only names are
 * compared and reported: a value may be a secret.
 */
export function misspelledVariables(environment: Record<string, string | undefined>, known: readonly string[] = Object.keys(envSchema.shape)): Misspelling[] {
  const ours = new Set(known);
  const found: Misspelling[] = [];
  for (const variable of Object.keys(environment).sort()) {
    if (ours.has(variable) || variable.length < MIN_LENGTH) continue;
    const name = variable.toUpperCase();
    if (FOREIGN_PREFIXES.some((prefix) => name.startsWith(prefix))) continue;
    const meant = closestOf(name, known);
    if (meant !== undefined) found.push({ variable, meant });
  }
  return found;
}

/** The line said of a misspelling, at start and by `config check`; it names the variables, never a value. */
export function describeMisspelling({ variable, meant }: Misspelling): string {
  return `${variable} is not a Gatehouse variable and is ignored; did you mean ${meant}?`;
}

function closestOf(name: string, known: readonly string[]): string | undefined {
  let best: { meant: string; edits: number } | undefined;
  for (const candidate of known) {
    const edits = name === candidate ? 0 : sameWords(name, candidate) ? 0.5 : distance(name, candidate);
    if (!closeEnough(name, candidate, edits)) continue;
    if (best === undefined || edits < best.edits) best = { meant: candidate, edits };
  }
  return best?.meant;
}

/** One edit, or two that are a swap (the same letters): Levenshtein counts a swap as two. */
function closeEnough(name: string, candidate: string, edits: number): boolean {
  if (edits <= 1) return true;
  if (edits > 2) return false;
  return sortedLetters(name) === sortedLetters(candidate);
}

/** `PORT_OPS` and `OPS_PORT`: the words of a name in another order. */
function sameWords(a: string, b: string): boolean {
  const words = (name: string) => name.split('_').filter(Boolean).sort().join('_');
  return a.includes('_') && words(a) === words(b);
}

function sortedLetters(name: string): string {
  return [...name].sort().join('');
}
