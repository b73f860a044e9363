import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';

/**
 * Reading a table file against its schema, and the errors it raises: every problem found,
 * each named by file and field (`config/routes.yaml: routes[2].credential: …`).
 */

/** A problem found in a file: the field path as printed, and what is wrong. */
export interface Problem {
  field: string;
  message: string;
}

export type Checked<T> = { ok: true; value: T } | { ok: false; problems: Problem[] };

export function parseFile<S extends z.ZodType>(file: string, schema: S): z.output<S> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`${file}: cannot read: ${(error as Error).message}`, { cause: error });
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (error) {
    throw new Error(`${file}: invalid YAML: ${(error as Error).message.split('\n')[0]}`, { cause: error });
  }
  const result = schema.safeParse(data ?? {});
  if (!result.success) {
    fail(
      file,
      result.error.issues.map((issue) =>
        issue.code === 'unrecognized_keys'
          ? { field: fieldOf([...issue.path, issue.keys[0] ?? '']), message: `unknown field (${issue.keys.join(', ')})` }
          : { field: fieldOf(issue.path), message: issue.message },
      ),
    );
  }
  return result.data;
}

export function check<T>(file: string, checked: Checked<T>): T {
  if (!checked.ok) fail(file, checked.problems);
  return checked.value;
}

function fail(file: string, problems: readonly Problem[]): never {
  throw new Error(problems.map((p) => `${file}: ${p.field || '(top level)'}: ${p.message}`).join('; '));
}

/** `routes[2].credential`, `scopes["mcp:calls"].tools[0]`. */
export function fieldOf(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) out += out ? `.${key}` : key;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}
