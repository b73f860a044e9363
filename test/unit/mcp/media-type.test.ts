import { describe, expect, it } from 'vitest';
import { answerTypeOf, parseMediaType } from '../../../src/mcp/media-type.ts';

describe('answerTypeOf: which upstream answers the gateway reads', () => {
  it.each([
    ['application/json', 'json'],
    ['application/json; charset=utf-8', 'json'],
    ['Application/JSON;Charset="UTF-8"', 'json'],
    ['application/json ; charset=utf-8 ', 'json'],
    ['application/json;', 'json'],
    ['text/event-stream', 'event-stream'],
    ['TEXT/Event-Stream; charset=utf-8', 'event-stream'],
    ['application/json-rpc', 'other'],
    ['application/x-text/event-stream', 'other'],
    ['application/jsonx', 'other'],
    ['application/vnd.api+json', 'other'],
    ['application/json, text/event-stream', 'other'],
    ['application/json charset=utf-8', 'other'],
    ['application/json; charset=utf-16', 'other'],
    ['application/json; charset=utf-8; charset=latin1', 'other'],
    ['text/event-stream; charset=iso-8859-1', 'other'],
    ['text/plain', 'other'],
    ['text/html', 'other'],
    ['', 'other'],
    ['application/', 'other'],
    ['/json', 'other'],
  ])('%j is %s', (value, type) => {
    expect(answerTypeOf(value)).toBe(type);
  });

  it('no Content-Type, or two of them, is other', () => {
    expect(answerTypeOf(undefined)).toBe('other');
    expect(answerTypeOf(['application/json', 'application/json'])).toBe('other');
  });
});

describe('parseMediaType', () => {
  it('reads the type and its parameters, quoted values unquoted', () => {
    expect(parseMediaType('Text/Plain; Charset="a\\"b"; q=1')).toEqual({ type: 'text/plain', parameters: [['charset', 'a"b'], ['q', '1']] });
  });

  it.each(['text', 'text/plain; charset', 'text/plain; =x', 'text/plain; a="unterminated', 'text/plain x'])('refuses %j', (value) => {
    expect(parseMediaType(value)).toBeUndefined();
  });
});
