import { Transform, type TransformCallback } from 'node:stream';
import { inspectAnswerText } from './answer-inspection.ts';
import type { ToolsSeen } from './tools-list-filter.ts';

/** An event bigger than this cannot be inspected in memory: the stream is ended rather than passed on unread. */
export const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;

export interface SseFilterOptions {
  /** The tools the key may call. */
  allowed: ReadonlySet<string>;
  /** The ids of the `tools/list` requests the stream answers; undefined when not known (a GET): see `AnswerRules`. */
  toolsListIds?: ReadonlySet<unknown> | undefined;
  /** Told of the tools each list passes on. */
  seen?: ToolsSeen | undefined;
  /** Told of every event dropped, and why. */
  onDropped?: (reason: string) => void;
  /**
   * Called with the data of every `endpoint` event (the legacy HTTP+SSE transport's first
   * event, naming where to post messages), and awaited before the event is passed on: the
   * client cannot post to the session before the gateway has bound it.
   */
  onEndpoint?: (data: string) => Promise<void>;
  maxEventBytes?: number;
}

/**
 * A `text/event-stream` passed on event by event (never the whole stream held back). Events
 * are parsed as the HTML standard says (lines end in CRLF, LF or CR; an empty line
 * dispatches) and written again as the gateway read them, with LF line ends: the `event`,
 * `id` and `retry` fields as they came, the data checked and re-serialised on one line
 * (`answer-inspection.ts`: strict JSON, tools lists filtered), comments emptied to a bare
 * `:` (still a keep-alive), fields the standard does not define left out (a lenient client
 * might read `Data:` as data). An event whose data is not strict JSON, or carries a tools
 * list the gateway may not pass on, is dropped whole; so is an unfinished event at the end
 * of the stream, as a client would drop it. Only the legacy transport's `endpoint` event
 * (when `onEndpoint` is set) carries data that is not JSON.
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
  const kept: string[] = [];
  for (const line of lines) {
    const field = fieldOf(line);
    if (field.name === 'data') data = data === undefined ? field.value : `${data}\n${field.value}`;
    else if (field.name === 'event' || field.name === 'id' || field.name === 'retry') kept.push(line);
    else if (field.name === '') kept.push(':');
    if (field.name === 'event') type = field.value;
  }
  // Nothing a client would parse: an event without data, or a priming event's empty data.
  if (data === undefined || data === '') return eventOf(kept, data);
  if (type === 'endpoint' && options.onEndpoint) {
    await options.onEndpoint(data);
    return eventOf(kept, data);
  }
  const inspection = inspectAnswerText(data, { allowed: options.allowed, toolsListIds: options.toolsListIds, seen: options.seen });
  if (!inspection.ok) {
    options.onDropped?.(inspection.reason);
    return '';
  }
  // One line: JSON.stringify never writes a raw line break.
  return eventOf(kept, inspection.serialized);
}

/** The event written again: its fields, then its data (a line break in it starts another `data:` line). */
function eventOf(fields: readonly string[], data: string | undefined): string {
  const lines = data === undefined ? fields : [...fields, ...data.split('\n').map((line) => (line === '' ? 'data:' : `data: ${line}`))];
  return lines.length === 0 ? '\n' : `${lines.join('\n')}\n\n`;
}

function fieldOf(line: string): { name: string; value: string } {
  const colon = line.indexOf(':');
  if (colon === -1) return { name: line, value: '' };
  const value = line.charCodeAt(colon + 1) === 32 ? line.slice(colon + 2) : line.slice(colon + 1);
  return { name: line.slice(0, colon), value };
}
