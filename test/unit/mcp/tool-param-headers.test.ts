import { describe, expect, it } from 'vitest';
import { ToolParamHeaders } from '../../../src/mcp/tool-param-headers.ts';

const tool = (name: string, properties: Record<string, unknown>) => ({ name, inputSchema: { type: 'object', properties } });

describe('ToolParamHeaders: the x-mcp-header annotations learnt from tools lists', () => {
  it('knows each annotated argument by its path, header names without case', () => {
    const headers = new ToolParamHeaders();
    headers.learn([
      tool('execute_sql', {
        region: { type: 'string', 'x-mcp-header': 'Region' },
        query: { type: 'string' },
        scope: { type: 'object', properties: { tenant: { type: 'string', 'x-mcp-header': 'Tenant-Id' } } },
      }),
      tool('plain', { q: { type: 'string' } }),
    ]);
    expect(headers.paramHeadersOf('execute_sql')).toEqual([
      { name: 'region', path: ['region'] },
      { name: 'tenant-id', path: ['scope', 'tenant'] },
    ]);
    expect(headers.paramHeadersOf('plain')).toEqual([]);
    expect(headers.paramHeadersOf('never_listed')).toBeUndefined();
  });

  it.each([
    ['a name that is not a token', { a: { type: 'string', 'x-mcp-header': 'Bad Name' } }],
    ['a name that is not a string', { a: { type: 'string', 'x-mcp-header': 5 } }],
    ['one name twice, in two cases', { a: { type: 'string', 'x-mcp-header': 'Region' }, b: { type: 'string', 'x-mcp-header': 'REGION' } }],
  ])('a schema with %s is not checkable: calls with Mcp-Param-* to it are refused', (_, properties) => {
    const headers = new ToolParamHeaders();
    headers.learn([tool('broken', properties)]);
    expect(headers.paramHeadersOf('broken')).toBe('invalid');
  });

  it('the latest list wins, and the oldest tools are forgotten past the bound', () => {
    const headers = new ToolParamHeaders({ maxTools: 2 });
    headers.learn([tool('a', { x: { type: 'string', 'x-mcp-header': 'X' } })]);
    headers.learn([tool('a', {})]);
    expect(headers.paramHeadersOf('a')).toEqual([]);
    headers.learn([tool('b', {}), tool('c', {})]);
    expect(headers.paramHeadersOf('a')).toBeUndefined();
    expect(headers.paramHeadersOf('c')).toEqual([]);
  });
});
