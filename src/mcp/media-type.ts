/**
 * What the Content-Type of an upstream answer on an MCP path lets the gateway read. Only two
 * kinds are inspected: JSON and event streams. Anything else — `application/json-rpc`,
 * `application/x-text/event-stream`, a charset other than UTF-8, a malformed or repeated
 * header, none at all — is `other`: a lenient client might still read a tools list out of it,
 * so it is never passed on unread.
 *
 * The media type is parsed as RFC 9110 §8.3.1 writes it (type and subtype are tokens compared
 * without case; parameters are `;`-separated `name=value`, the value a token or a quoted
 * string), rather than matched by prefix.
 */
export type AnswerType = 'json' | 'event-stream' | 'other';

/** The values the MCP servers send, answered without parsing (the allow path). */
const COMMON: ReadonlyMap<string, AnswerType> = new Map([
  ['application/json', 'json'],
  ['application/json; charset=utf-8', 'json'],
  ['text/event-stream', 'event-stream'],
  ['text/event-stream; charset=utf-8', 'event-stream'],
]);

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const MEDIA_TYPE = new RegExp(`^(${TOKEN})/(${TOKEN})`);
const PARAMETER = new RegExp(`^[ \\t]*;[ \\t]*(?:(${TOKEN})=(${TOKEN}|"(?:[^"\\\\\\x00-\\x08\\x0a-\\x1f\\x7f]|\\\\[\\t\\x20-\\x7e\\x80-\\xff])*"))?`);

export function answerTypeOf(value: string | string[] | undefined): AnswerType {
  // A repeated Content-Type: which one a client believes is anyone's guess.
  if (typeof value !== 'string') return 'other';
  return COMMON.get(value) ?? parsedAnswerType(value.trim());
}

function parsedAnswerType(value: string): AnswerType {
  const media = parseMediaType(value);
  if (media === undefined) return 'other';
  const type = media.type === 'application/json' ? 'json' : media.type === 'text/event-stream' ? 'event-stream' : 'other';
  if (type === 'other') return 'other';
  // JSON and event streams are UTF-8 (RFC 8259 §8.1, the HTML standard): the gateway reads them so, and a
  // client told another charset might read other characters — a tools list the gateway never saw.
  const charsets = media.parameters.filter(([name]) => name === 'charset');
  if (charsets.length > 1 || (charsets.length === 1 && charsets[0]![1].toLowerCase() !== 'utf-8')) return 'other';
  return type;
}

export interface MediaType {
  /** `type/subtype`, lower case. */
  readonly type: string;
  /** `[name, value]` in order, names lower case, quoted values unquoted. */
  readonly parameters: ReadonlyArray<readonly [string, string]>;
}

/** A media type as RFC 9110 §8.3.1 writes it; undefined for anything else. */
export function parseMediaType(value: string): MediaType | undefined {
  const head = MEDIA_TYPE.exec(value);
  if (head === null) return undefined;
  const parameters: Array<[string, string]> = [];
  let rest = value.slice(head[0].length);
  while (rest !== '') {
    const parameter = PARAMETER.exec(rest);
    if (parameter === null) return undefined;
    if (parameter[1] !== undefined) parameters.push([parameter[1].toLowerCase(), unquote(parameter[2]!)]);
    rest = rest.slice(parameter[0].length);
  }
  return { type: `${head[1]}/${head[2]}`.toLowerCase(), parameters };
}

function unquote(value: string): string {
  return value.startsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value;
}
