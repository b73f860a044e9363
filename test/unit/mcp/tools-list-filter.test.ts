import { describe, expect, it } from 'vitest';
import { carriesToolsList, filterToolsList, filterToolsListJson } from '../../../src/mcp/tools-list-filter.ts';

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
    expect(carriesToolsList(value)).toBe(false);
  });

  it('carriesToolsList: a result with a tools array, alone or in a batch', () => {
    expect(carriesToolsList(listResult(1, []))).toBe(true);
    expect(carriesToolsList([{ jsonrpc: '2.0', id: 1, result: {} }, listResult(2, [])])).toBe(true);
  });
});

describe('filterToolsListJson', () => {
  it('filters and re-serialises', () => {
    const text = JSON.stringify(listResult(1, ['place_outbound_call', 'list_agents']));
    expect(JSON.parse(filterToolsListJson(text, ALLOWED)!)).toEqual(listResult(1, ['list_agents']));
  });

  it('always re-serialises, so a client reading duplicate keys first-wins sees what was filtered', () => {
    const text = `{"jsonrpc":"2.0","id":1,"result":{"tools":${JSON.stringify([tool('place_outbound_call')])},"tools":[]}}`;
    expect(filterToolsListJson(text, ALLOWED)).toBe('{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}');
  });

  it('undefined for a body that is not JSON', () => {
    expect(filterToolsListJson('{"tools": [', ALLOWED)).toBeUndefined();
  });
});
