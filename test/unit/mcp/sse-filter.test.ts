import { once } from 'node:events';
import { PassThrough, type Transform } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createSseFilter, type SseFilterOptions } from '../../../src/mcp/sse-filter.ts';

const ALLOWED: ReadonlySet<string> = new Set(['list_agents', 'get_agent_status']);
const tool = (name: string) => ({ name, inputSchema: { type: 'object' } });
const listResult = (id: number, names: string[]) => ({ jsonrpc: '2.0', id, result: { tools: names.map(tool) } });
const ALL = ['place_outbound_call', 'list_agents', 'get_agent_status', 'record_event'];

/** Writes `chunks` (strings or bytes) one by one and collects everything the filter emits. */
async function run(chunks: Array<string | Buffer>, options: Partial<SseFilterOptions> = {}): Promise<string> {
  const filter = createSseFilter({ allowed: ALLOWED, ...options });
  let out = '';
  filter.on('data', (chunk: Buffer | string) => (out += chunk.toString()));
  const done = new Promise<void>((resolve, reject) => {
    filter.on('end', resolve);
    filter.on('error', reject);
  });
  for (const chunk of chunks) filter.write(chunk);
  filter.end();
  await done;
  return out;
}

/** The `data` of each event of an event-stream text, parsed as JSON where it is. */
function dataOf(stream: string): unknown[] {
  return stream
    .split(/\n\n/)
    .filter((event) => event.includes('data:'))
    .map((event) => {
      const data = event
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
        .join('\n');
      try {
        return JSON.parse(data);
      } catch {
        return data;
      }
    });
}

describe('createSseFilter', () => {
  it('filters a tools/list result and keeps the event id and type', async () => {
    const out = await run([`event: message\nid: 7\ndata: ${JSON.stringify(listResult(2, ALL))}\n\n`]);
    expect(out).toBe(`event: message\nid: 7\ndata: ${JSON.stringify(listResult(2, ['list_agents', 'get_agent_status']))}\n\n`);
  });

  it('passes other events on as they were read: comments emptied, the data re-serialised', async () => {
    const result = { jsonrpc: '2.0', id: 1, result: { content: [] } };
    const events = `: keep-alive\n\nevent: message\ndata: ${JSON.stringify(result, null, 1).replaceAll('\n', ' ')}\n\nretry: 1000\n\nid: 3\ndata: \n\n`;
    expect(await run([events])).toBe(`:\n\nevent: message\ndata: ${JSON.stringify(result)}\n\nretry: 1000\n\nid: 3\ndata:\n\n`);
  });

  it('reassembles an event split at every byte, multi-byte characters included', async () => {
    const message = { ...listResult(4, ALL), note: 'é✓😀' };
    const bytes = Buffer.from(`data: ${JSON.stringify(message)}\n\n`);
    const chunks = [...bytes].map((byte) => Buffer.from([byte]));
    expect(dataOf(await run(chunks))).toEqual([{ ...listResult(4, ['list_agents', 'get_agent_status']), note: 'é✓😀' }]);
  });

  it('reads CRLF and CR line ends, including a CRLF split between chunks', async () => {
    const json = JSON.stringify(listResult(1, ALL));
    const out = await run([`data: ${json}\r`, `\n\r\n`, `data: ${json}\r\r`]);
    expect(dataOf(out)).toEqual([listResult(1, ['list_agents', 'get_agent_status']), listResult(1, ['list_agents', 'get_agent_status'])]);
  });

  it('joins multi-line data before parsing it', async () => {
    const json = JSON.stringify(listResult(1, ALL), null, 1).split('\n');
    const out = await run([json.map((line) => `data: ${line}`).join('\n') + '\n\n']);
    expect(dataOf(out)).toEqual([listResult(1, ['list_agents', 'get_agent_status'])]);
  });

  it('filters batch responses', async () => {
    const out = await run([`data: ${JSON.stringify([listResult(1, ALL), { jsonrpc: '2.0', id: 2, result: {} }])}\n\n`]);
    expect(dataOf(out)).toEqual([[listResult(1, ['list_agents', 'get_agent_status']), { jsonrpc: '2.0', id: 2, result: {} }]]);
  });

  it('passes each event on as soon as it is complete, without waiting for the end of the stream', async () => {
    const filter: Transform = createSseFilter({ allowed: ALLOWED });
    const source = new PassThrough();
    source.pipe(filter);
    const received: string[] = [];
    filter.on('data', (chunk: Buffer) => received.push(chunk.toString()));
    source.write(`data: ${JSON.stringify(listResult(1, ALL))}\n\n`);
    await once(filter, 'data');
    expect(dataOf(received.join(''))).toEqual([listResult(1, ['list_agents', 'get_agent_status'])]);
    // An unfinished event, then the rest of it. Chunks are transformed one at a time and what each
    // yields is emitted in order: had the unfinished part yielded anything, it would come next.
    const event = `data: ${JSON.stringify(listResult(2, ALL))}`;
    source.write(event.slice(0, 20));
    source.write(`${event.slice(20)}\n\n`);
    await once(filter, 'data');
    expect(received).toHaveLength(2);
    expect(dataOf(received[1]!)).toEqual([listResult(2, ['list_agents', 'get_agent_status'])]);
    source.end();
  });

  it('drops an unfinished event at the end of the stream (a client drops it too)', async () => {
    expect(await run([`data: ${JSON.stringify(listResult(1, ALL))}`])).toBe('');
  });

  it('ends the stream with an error when one event grows past the limit', async () => {
    await expect(run(['data: ', 'x'.repeat(200), '\n\n'], { maxEventBytes: 100 })).rejects.toThrow(/larger than 100 bytes/);
  });

  it('awaits onEndpoint before passing the endpoint event on', async () => {
    const order: string[] = [];
    // The binding finishes only when the test lets it: until then nothing may be sent.
    let bind = () => {};
    const bound = new Promise<void>((resolve) => (bind = resolve));
    let asked = () => {};
    const binding = new Promise<void>((resolve) => (asked = resolve));
    const filter = createSseFilter({
      allowed: ALLOWED,
      onEndpoint: async (data) => {
        asked();
        await bound;
        order.push(`bound ${data}`);
      },
    });
    filter.on('data', (chunk: Buffer) => order.push(`sent ${chunk.toString().trim()}`));
    const ended = new Promise((resolve) => filter.on('end', resolve));
    filter.end('event: endpoint\ndata: /messages?sessionId=abc\n\n');
    await binding;
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual([]);
    bind();
    await ended;
    expect(order).toEqual(['bound /messages?sessionId=abc', 'sent event: endpoint\ndata: /messages?sessionId=abc']);
  });

  it('a failing onEndpoint ends the stream before the event is sent', async () => {
    let out = '';
    const filter = createSseFilter({ allowed: ALLOWED, onEndpoint: async () => Promise.reject(new Error('cannot bind')) });
    filter.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const failed = new Promise<Error>((resolve) => filter.on('error', resolve));
    filter.end('event: endpoint\ndata: /messages?sessionId=abc\n\n');
    expect((await failed).message).toBe('cannot bind');
    expect(out).toBe('');
  });

  // What a lenient client reads but the gateway's parser does not, or a tools list where none belongs: the event is dropped.
  const dropped: Array<[string, string, Partial<SseFilterOptions>]> = [
    ['data that is not JSON', 'data: plain text', {}],
    ['a byte-order mark before the JSON', `data: \ufeff${JSON.stringify(listResult(1, ALL))}`, {}],
    ['NaN', 'data: {"jsonrpc":"2.0","id":1,"result":{"n":NaN}}', {}],
    ['a duplicate key', `data: {"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":${JSON.stringify({ tools: ALL.map(tool) })}}`, {}],
    ['a duplicate key deep down', 'data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"a":{"b":1,"b":2}}]}}', {}],
    ['a trailing comma', 'data: {"jsonrpc":"2.0","id":1,"result":{},}', {}],
    ['Result spelled in another case', `data: ${JSON.stringify({ jsonrpc: '2.0', id: 1, Result: { tools: ALL.map(tool) } })}`, {}],
    ['a tools list answering another request', `data: ${JSON.stringify(listResult(2, ALL))}`, { toolsListIds: new Set([1]) }],
    ['a tools list when no tools/list was posted', `data: ${JSON.stringify(listResult(1, ALL))}`, { toolsListIds: new Set() }],
    ['an endpoint event on a stream without one', 'event: endpoint\ndata: /messages?sessionId=abc', {}],
  ];
  it.each(dropped)('drops an event with %s, and says why', async (_what, event, options) => {
    const reasons: string[] = [];
    const next = `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress' })}\n\n`;
    const out = await run([`${event}\n\n`, next], { ...options, onDropped: (reason) => reasons.push(reason) });
    expect(out).toBe(next);
    expect(out).not.toContain('place_outbound_call');
    expect(reasons).toHaveLength(1);
  });

  it('a tools list answering a posted tools/list is filtered, matched by id', async () => {
    const out = await run([`data: ${JSON.stringify(listResult(7, ALL))}\n\n`], { toolsListIds: new Set([7]) });
    expect(dataOf(out)).toEqual([listResult(7, ['list_agents', 'get_agent_status'])]);
  });

  it('leaves out fields the standard does not define (a lenient client might read Data: as data)', async () => {
    const out = await run([`Data: ${JSON.stringify(listResult(1, ALL))}\nid: 1\ndata : x\n\n`]);
    expect(out).toBe('id: 1\n\n');
  });
});
