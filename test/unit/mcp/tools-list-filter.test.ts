import { describe, expect, it } from 'vitest';
import { filterToolsList, toolsListShape } from '../../../src/mcp/tools-list-filter.ts';

const ALLOWED: ReadonlySet<string> = new Set(['list_agents', 'get_agent_status']);
const tool = (name: string) => ({ name, description: `${name} tool`, inputSchema: { type: 'object' } });
const listResult = (id: number, names: string[], extra: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  result: { tools: names.map(tool), ...extra },
});

describe('filterToolsList', () => {
  it('keeps only the allowed tools, and everything else of the result', () => {
    const message = listResult(3, ['place_outbound_call', 'list_agents', 'record_event', 'get_agent_status'], { nextCursor: 'c2', _meta: { a: 1 } });
    expect(filterToolsList(message, ALLOWED)).toEqual(listResult(3, ['list_agents', 'get_agent_status'], { nextCursor: 'c2', _meta: { a: 1 } }));
  });

  it('returns the same value when nothing is removed', () => {
    const message = listResult(1, ['list_agents']);
    expect(filterToolsList(message, ALLOWED)).toBe(message);
  });

  it('marks a list of the stateless revision private to the key (cacheScope), even when nothing is removed', () => {
    const hinted = listResult(1, ['list_agents'], { ttlMs: 60_000, cacheScope: 'public', resultType: 'complete' });
    expect(filterToolsList(hinted, ALLOWED)).toEqual(listResult(1, ['list_agents'], { ttlMs: 60_000, cacheScope: 'private', resultType: 'complete' }));
    const onlyType = listResult(1, ['list_agents', 'record_event'], { resultType: 'complete' });
    expect(filterToolsList(onlyType, ALLOWED)).toEqual(listResult(1, ['list_agents'], { resultType: 'complete', cacheScope: 'private' }));
    const alreadyPrivate = listResult(1, ['list_agents'], { ttlMs: 0, cacheScope: 'private' });
    expect(filterToolsList(alreadyPrivate, ALLOWED)).toBe(alreadyPrivate);
  });

  it('tells `seen` of the tools it passes on, not of the others', () => {
    const seen: unknown[][] = [];
    filterToolsList(listResult(1, ['list_agents', 'place_outbound_call']), ALLOWED, (tools) => void seen.push([...tools]));
    expect(seen).toEqual([[tool('list_agents')]]);
  });

  it('filters every element of a batch response', () => {
    const batch = [listResult(1, ['list_agents', 'place_outbound_call']), { jsonrpc: '2.0', id: 2, result: {} }, listResult(3, ['lookup_end_user'])];
    expect(filterToolsList(batch, ALLOWED)).toEqual([listResult(1, ['list_agents']), { jsonrpc: '2.0', id: 2, result: {} }, listResult(3, [])]);
  });

  it('drops entries that are not named tools', () => {
    const message = { jsonrpc: '2.0', id: 1, result: { tools: [tool('list_agents'), 'list_agents', null, { name: 5 }, { title: 'x' }, ['list_agents']] } };
    expect(filterToolsList(message, ALLOWED)).toEqual(listResult(1, ['list_agents']));
  });

  it('an empty allowed set leaves an empty list', () => {
    expect(filterToolsList(listResult(1, ['list_agents']), new Set())).toEqual(listResult(1, []));
  });

  it.each([
    ['a request', { jsonrpc: '2.0', id: 1, method: 'tools/list' }],
    ['a tools/call result', { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: '{"tools":[]}' }] } }],
    ['an error', { jsonrpc: '2.0', id: 1, error: { code: 1, message: 'x' } }],
    ['a notification', { jsonrpc: '2.0', method: 'notifications/tools/list_changed' }],
    ['a result whose tools is not an array', { jsonrpc: '2.0', id: 1, result: { tools: { name: 'place_outbound_call' } } }],
    ['a string', 'tools'],
  ])('leaves %s alone', (_what, value) => {
    expect(filterToolsList(value, ALLOWED)).toBe(value);
    expect(toolsListShape(value)).toBe('none');
  });

  it('drops a tool that also names itself under another case (a case-insensitive reader sees that name)', () => {
    const message = { jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'list_agents', Name: 'place_outbound_call' }, { name: 'list_agents', NAME: 'list_agents' }, tool('get_agent_status')] } };
    expect(filterToolsList(message, ALLOWED)).toEqual({ jsonrpc: '2.0', id: 1, result: { tools: [tool('get_agent_status')] } });
  });
});

describe('toolsListShape', () => {
  it.each([
    ['a tools/list result', listResult(1, []), 'list'],
    ['a result without tools', { jsonrpc: '2.0', id: 1, result: { content: [] } }, 'none'],
    ['Result for result', { jsonrpc: '2.0', id: 1, Result: { tools: [] } }, 'ambiguous'],
    ['TOOLS for tools', { jsonrpc: '2.0', id: 1, result: { TOOLS: [] } }, 'ambiguous'],
    ['a long s for s (Go folds it)', { jsonrpc: '2.0', id: 1, result: { 'tool\u017f': [] } }, 'ambiguous'],
    ['result and Result side by side', { jsonrpc: '2.0', id: 1, result: {}, Result: { tools: [] } }, 'ambiguous'],
    ['a batch is not a message', [listResult(1, [])], 'none'],
  ])('%s: %s', (_what, message, shape) => {
    expect(toolsListShape(message)).toBe(shape);
  });
});
