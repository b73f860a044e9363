import { Transform, type TransformCallback } from 'node:stream';
import { carriesToolsList, filterToolsList } from './tools-list-filter.ts';

/** An event bigger than this cannot be inspected in memory: the stream is ended rather than passed on unread. */
export const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;

export interface SseFilterOptions {
  /** The tools the key may call. */
  allowed: ReadonlySet<string>;
  /**
   * Called with the data of every `endpoint` event (the legacy HTTP+SSE transport's first
   * event, naming where to post messages), and awaited before the event is passed on: the
   * client cannot post to the session before the gateway has bound it.
   */
  onEndpoint?: (data: string) => Promise<void>;
  maxEventBytes?: number;
}

/**
 * A `text/event-stream` passed on event by event (never the whole stream held back), with
 * every JSON-RPC message carrying a `tools/list` result filtered and re-serialised
 * (`tools-list-filter.ts`). Events are parsed as the HTML standard says (lines end in
 * CRLF, LF or CR; an empty line dispatches) and written with LF line ends; everything else
 * in them is kept. An unfinished event at the end of the stream is dropped, as a client
 * would drop it.
 */
export function createSseFilter(options: SseFilterOptions): Transform {
  const maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  const decoder = new TextDecoder('utf-8');
  let partial = '';
  let lines: string[] = [];
  let eventSize = 0;
  /** The previous chunk ended in CR: an LF starting this one belongs to that line end. */
  let afterCr = false;

  async function take(text: string, push: (out: string) => void): Promise<void> {
    if (afterCr && text.startsWith('\n')) text = text.slice(1);
    afterCr = text.endsWith('\r');
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = partial + text.slice(start, i);
      partial = '';
      if (c === 13 && text.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
      if (line === '') {
        const event = lines;
        lines = [];
        eventSize = 0;
        push(await dispatch(event, options));
      } else {
        lines.push(line);
        eventSize += line.length + 1;
      }
    }
    partial += text.slice(start);
    if (eventSize + partial.length > maxEventBytes) {
      throw new Error(`An event of the upstream's stream is larger than ${maxEventBytes} bytes`);
    }
  }

  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      let out = '';
      take(decoder.decode(chunk, { stream: true }), (text) => (out += text)).then(
        () => callback(null, out === '' ? undefined : out),
        (error: unknown) => callback(error as Error),
      );
    },
    flush(callback: TransformCallback) {
      let out = '';
      take(decoder.decode(), (text) => (out += text)).then(
        () => callback(null, out === '' ? undefined : out),
        (error: unknown) => callback(error as Error),
      );
    },
  });
}

async function dispatch(lines: readonly string[], options: SseFilterOptions): Promise<string> {
  if (lines.length === 0) return '\n';
  let type = 'message';
  let data: string | undefined;
  for (const line of lines) {
    const field = fieldOf(line);
    if (field.name === 'data') data = data === undefined ? field.value : `${data}\n${field.value}`;
    else if (field.name === 'event') type = field.value;
  }
  if (data !== undefined && type === 'endpoint' && options.onEndpoint) await options.onEndpoint(data);
  const rewritten = data === undefined ? undefined : rewriteData(data, options.allowed);
  if (rewritten === undefined) return `${lines.join('\n')}\n\n`;
  const kept = lines.filter((line) => fieldOf(line).name !== 'data');
  kept.push(`data: ${rewritten}`);
  return `${kept.join('\n')}\n\n`;
}

/** The data re-serialised when it is a JSON-RPC message carrying a tools list; undefined to keep it as it is. */
function rewriteData(data: string, allowed: ReadonlySet<string>): string | undefined {
  const first = data.trimStart().charCodeAt(0);
  if (first !== 123 /* { */ && first !== 91 /* [ */) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return undefined;
  }
  if (!carriesToolsList(value)) return undefined;
  // One line: JSON.stringify never writes a raw line break.
  return JSON.stringify(filterToolsList(value, allowed));
}

function fieldOf(line: string): { name: string; value: string } {
  const colon = line.indexOf(':');
  if (colon === -1) return { name: line, value: '' };
  const value = line.charCodeAt(colon + 1) === 32 ? line.slice(colon + 2) : line.slice(colon + 1);
  return { name: line.slice(0, colon), value };
}
