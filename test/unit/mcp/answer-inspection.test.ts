import { describe, expect, it } from 'vitest';
import { cannotHoldToolsList, inspectAnswerBytes, inspectAnswerText, toolsListIdsOf, type AnswerRules } from '../../../src/mcp/answer-inspection.ts';

const ALLOWED: ReadonlySet<string> = new Set(['list_agents']);
const tool = (name: string) => ({ name, inputSchema: { type: 'object' } });
const listResult = (id: unknown, names: string[]) => ({ jsonrpc: '2.0', id, result: { tools: names.map(tool) } });
const ALL = ['place_outbound_call', 'list_agents'];
const answering = (...ids: unknown[]): AnswerRules => ({ allowed: ALLOWED, toolsListIds: new Set(ids) });
const bytes = (text: string) => new TextEncoder().encode(text);

describe('inspectAnswerText: the strict reading of an upstream answer', () => {
  it('a tools list answering a posted tools/list is filtered and re-serialised', () => {
    const inspection = inspectAnswerText(JSON.stringify(listResult(3, ALL), null, 2), answering(3));
    expect(inspection).toEqual({ ok: true, serialized: JSON.stringify(listResult(3, ['list_agents'])) });
  });

  it('any other answer is re-serialised as parsed: escapes and spacing are the gateway\'s', () => {
    const inspection = inspectAnswerText('{ "jsonrpc" : "2.0", "id" : 1, "result" : { "content" : [ { "type" : "te\\u0078t" } ] } }', answering());
    expect(inspection).toEqual({ ok: true, serialized: '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text"}]}}' });
  });

  it('a batch answer: the tools list filtered where its id asked for one', () => {
    const batch = [{ jsonrpc: '2.0', id: 1, result: {} }, listResult(2, ALL)];
    const inspection = inspectAnswerText(JSON.stringify(batch), answering(2));
    expect(inspection.ok && JSON.parse(inspection.serialized)).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }, listResult(2, ['list_agents'])]);
  });

  it('ids unknown (a GET stream): every tools list is filtered by its shape', () => {
    const inspection = inspectAnswerText(JSON.stringify(listResult(9, ALL)), { allowed: ALLOWED, toolsListIds: undefined });
    expect(inspection).toEqual({ ok: true, serialized: JSON.stringify(listResult(9, ['list_agents'])) });
  });

  const refused: Array<[string, string, AnswerRules]> = [
    ['a tools list answering tools/call', JSON.stringify(listResult(1, ALL)), answering()],
    ['a tools list whose id is another request\'s', JSON.stringify(listResult(2, ALL)), answering(1)],
    ['a tools list whose id is the string of a number', JSON.stringify(listResult('1', ALL)), answering(1)],
    ['a tools list hidden in a batch', JSON.stringify([{ jsonrpc: '2.0', id: 1, result: {} }, listResult(2, ALL)]), answering(1)],
    ['a batch nested in a batch', JSON.stringify([[listResult(1, ALL)]]), answering(1)],
    ['Result for result', JSON.stringify({ jsonrpc: '2.0', id: 1, Result: { tools: ALL.map(tool) } }), answering(1)],
    ['Tools beside tools', JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [], Tools: ALL.map(tool) } }), answering(1)],
    ['a duplicate member', `{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":${JSON.stringify({ tools: ALL.map(tool) })}}`, answering(1)],
    ['a duplicate member through an escape', `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"tool\\u0073":${JSON.stringify(ALL.map(tool))}}}`, answering(1)],
    ['a duplicate member deep down', '{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"x":[{"a":1,"a":2}]}}}', answering()],
    ['a byte-order mark', `\ufeff${JSON.stringify(listResult(1, ALL))}`, answering(1)],
    ['NaN', '{"jsonrpc":"2.0","id":1,"result":{"n":NaN}}', answering()],
    ['Infinity', '{"jsonrpc":"2.0","id":1,"result":{"n":Infinity}}', answering()],
    ['a single-quoted string', "{'jsonrpc':'2.0','id':1,'result':{}}", answering()],
    ['a comment', '{"jsonrpc":"2.0","id":1,"result":{}} // done', answering()],
    ['a trailing comma', '{"jsonrpc":"2.0","id":1,"result":{},}', answering()],
    ['two documents', '{"jsonrpc":"2.0","id":1,"result":{}}{"jsonrpc":"2.0","id":1,"result":{}}', answering()],
    ['an empty body', '', answering()],
  ];
  it.each(refused)('refuses %s', (_what, text, rules) => {
    const inspection = inspectAnswerText(text, rules);
    expect(inspection.ok).toBe(false);
    expect(inspection.ok ? '' : inspection.reason).not.toBe('');
  });
});

describe('inspectAnswerBytes', () => {
  it('refuses bytes that are not UTF-8, and a byte-order mark', () => {
    expect(inspectAnswerBytes(Uint8Array.from([0x7b, 0xff, 0x7d]), answering()).ok).toBe(false);
    expect(inspectAnswerBytes(Uint8Array.from([0xef, 0xbb, 0xbf, ...bytes('{"jsonrpc":"2.0","id":1,"result":{}}')]), answering()).ok).toBe(false);
  });

  it('reads UTF-8', () => {
    expect(inspectAnswerBytes(bytes('{"jsonrpc":"2.0","id":1,"result":{"text":"é✓😀"}}'), answering())).toEqual({
      ok: true,
      serialized: '{"jsonrpc":"2.0","id":1,"result":{"text":"é✓😀"}}',
    });
  });
});

describe('toolsListIdsOf', () => {
  it('the string and number ids of tools/list requests, nothing else', () => {
    const ids = toolsListIdsOf([
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 'a', method: 'tools/list' },
      { jsonrpc: '2.0', method: 'tools/list' },
      { jsonrpc: '2.0', id: null, method: 'tools/list' },
      { jsonrpc: '2.0', id: 2, method: 'tools/call' },
    ]);
    expect([...ids]).toEqual([1, 'a']);
  });
});

describe('cannotHoldToolsList', () => {
  const bytes = (text: string) => new TextEncoder().encode(text);
  it.each<[string, string, boolean]>([
    ['a tools/call result', '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}', true],
    ['a tools member', '{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}', false],
    ['tools in another case', '{"result":{"TOOLS":[]}}', false],
    ['tools inside a string only', '{"result":{"text":"list the Tools"}}', false],
    ['tools at the very end', '{"a":"tools"}', false],
    ['a unicode escape that could spell it', '{"result":{"tool\\u0073":[]}}', false],
    ['an escape in upper case', '{"a":"\\U0041"}', false],
    ['a byte beyond ASCII (U+017F folds onto s)', '{"result":{"toolſ":[]}}', false],
    ['other escapes', '{"a":"line\\nbreak \\"quoted\\""}', true],
    ['almost tools', '{"tool":1,"tolls":2,"tool s":3}', true],
  ])('%s: %s', (_what, text, expected) => {
    expect(cannotHoldToolsList(bytes(text))).toBe(expected);
  });

  it.each<[string, string, boolean]>([
    ['a result with no tools member: passed on as it came', '{"jsonrpc":"2.0","id":7,"result":{"content":[]}}', true],
    ['a duplicate member, though no tools list is possible', '{"jsonrpc":"2.0","id":7,"id":8,"result":{}}', false],
    ['NaN', '{"jsonrpc":"2.0","id":7,"result":NaN}', false],
  ])('inspectAnswerBytes, %s', (_what, text, ok) => {
    const inspection = inspectAnswerBytes(bytes(text), { allowed: new Set(), toolsListIds: new Set() });
    expect(inspection.ok).toBe(ok);
    if (inspection.ok) expect(inspection.serialized).toBe(text);
  });
});
