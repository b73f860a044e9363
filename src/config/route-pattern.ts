/** The path-pattern grammar of `config/routes.yaml` (described at the top of that file). */

export type PathSegment =
  | { readonly kind: 'literal'; readonly value: string }
  | { readonly kind: 'param'; readonly name: string };

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** pchar without percent-encoding and without `$ * { }`, which belong to the pattern syntax. */
const LITERAL = /^[A-Za-z0-9._~!&'()+,;=:@-]+$/;

/** Parses the strict path-pattern grammar described at the top of config/routes.yaml. */
export function parsePattern(path: string): { segments: readonly PathSegment[]; rest: boolean } | { problem: string } {
  if (!path.startsWith('/')) return { problem: 'must start with /' };
  if (path === '/') return { segments: Object.freeze([]), rest: false };
  const parts = path.slice(1).split('/');
  const segments: PathSegment[] = [];
  const names = new Set<string>();
  let rest = false;
  for (const [index, part] of parts.entries()) {
    if (part === '**') {
      if (index !== parts.length - 1) return { problem: '/** may only end a pattern' };
      rest = true;
    } else if (part.startsWith('{') && part.endsWith('}')) {
      const name = part.slice(1, -1);
      if (!PARAM_NAME.test(name)) return { problem: `{${name}} is not a valid parameter name` };
      if (names.has(name)) return { problem: `{${name}} appears twice` };
      names.add(name);
      segments.push(Object.freeze({ kind: 'param', name }));
    } else if (part === '') {
      return { problem: 'empty segment (// or a trailing /)' };
    } else if (part === '.' || part === '..') {
      return { problem: 'dot segments are not allowed' };
    } else if (!LITERAL.test(part)) {
      return { problem: `segment "${part}" is neither a literal, a {parameter} nor a final **` };
    } else {
      segments.push(Object.freeze({ kind: 'literal', value: part }));
    }
  }
  return { segments: Object.freeze(segments), rest };
}
