import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { mcpRefusalResponse, mcpRequestRefusal } from '../../../src/mcp/json-rpc-error.ts';

const call = (name: string, id?: number | string) => ({ jsonrpc: '2.0', ...(id === undefined ? {} : { id }), method: 'tools/call', params: { name } });

describe('mcpRefusalResponse: a refused message as an MCP client sees it', () => {
  it('a single message: 403, WWW-Authenticate naming the scope, JSON-RPC error with the same id and the stable code', () => {
    const response = mcpRefusalResponse(
      { code: 'insufficient_scope', detail: 'The API key lacks the scope mcp:calls', scope: 'mcp:calls', messageIndex: 0 },
      [call('place_outbound_call', 'req-7')],
    );
    expect(response.status).toBe(403);
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(response.headers['www-authenticate']).toBe('Bearer realm="gatehouse", error="insufficient_scope", scope="mcp:calls"');
    expect(JSON.parse(response.body)).toEqual({
      jsonrpc: '2.0',
      id: 'req-7',
      error: {
        code: -32003,
        message: 'The API key lacks the scope mcp:calls',
        data: { code: 'insufficient_scope', status: 403, detail: 'The API key lacks the scope mcp:calls', scope: 'mcp:calls' },
      },
    });
  });

  it('a 405 names the methods the path serves in Allow, from the refusal or from a GatewayError', () => {
    const refused = mcpRefusalResponse({ code: 'method_not_allowed', detail: 'This MCP path serves POST', allowedMethods: ['POST'] });
    expect(refused.status).toBe(405);
    expect(refused.headers['allow']).toBe('POST');
    const fromError = mcpRequestRefusal(new GatewayError('method_not_allowed', 'no', { allow: ['GET', 'POST'] }));
    expect(fromError.headers['allow']).toBe('GET, POST');
  });

  it.each([
    ['feature_not_licensed', 403, -32003],
    ['agent_mismatch', 403, -32003],
    ['unknown_tool', 200, -32602],
    ['method_not_found', 200, -32601],
    ['header_mismatch', 400, -32020],
    ['unsupported_protocol_version', 400, -32022],
    ['origin_not_allowed', 403, -32003],
    ['session_mismatch', 403, -32003],
    ['method_not_allowed_for_key', 403, -32003],
    ['validation_failed', 400, -32600],
    ['bad_request', 400, -32700],
    ['unsupported_media_type', 415, -32600],
    ['not_found', 404, -32001],
    ['store_unavailable', 503, -32000],
  ] as const)('%s: HTTP %i, JSON-RPC %i, code in error.data', (code, status, rpc) => {
    const response = mcpRefusalResponse({ code, detail: 'x', messageIndex: 0 }, [call('t', 1)]);
    expect(response.status).toBe(status);
    const body = JSON.parse(response.body);
    expect(body).toMatchObject({ id: 1, error: { code: rpc, data: { code, status } } });
    // A challenge only where another credential or scope could change the answer (the MCP SDK steps up on one).
    if (code === 'origin_not_allowed' || code === 'method_not_allowed_for_key') expect(response.headers['www-authenticate']).toBeUndefined();
    else if (status === 403) expect(response.headers['www-authenticate']).toMatch(/error="insufficient_scope"/);
    // Answered in a tool server's place: no challenge, as no scope could allow it.
    if (status === 200) expect(response.headers['www-authenticate']).toBeUndefined();
  });

  it('method_not_found is a 404 in the stateless revision, as its tool servers answer it', () => {
    expect(mcpRefusalResponse({ code: 'method_not_found', detail: 'x', messageIndex: 0 }, [call('t', 1)], false, { revision: '2026-07-28' }).status).toBe(404);
    expect(mcpRefusalResponse({ code: 'method_not_found', detail: 'x', messageIndex: 0 }, [call('t', 1)], false, { revision: '2025-11-25' }).status).toBe(200);
    // The legacy transport answers on its stream: the POST's refusal must be an HTTP error for the client to see it.
    expect(mcpRefusalResponse({ code: 'unknown_tool', detail: 'x', messageIndex: 0 }, [call('t', 1)], false, { answersOnStream: true }).status).toBe(404);
  });

  it('a refused body of notifications only gets an HTTP error status: there is no request to answer', () => {
    const notification = { jsonrpc: '2.0', method: 'notifications/nope' };
    expect(mcpRefusalResponse({ code: 'method_not_found', detail: 'x', messageIndex: 0 }, [notification], false, { revision: '2025-11-25' }).status).toBe(404);
  });

  it('unsupported_protocol_version carries the revision error data: supported and requested', () => {
    const response = mcpRefusalResponse({ code: 'unsupported_protocol_version', detail: 'x', requested: '1999-01-01' }, [call('t', 1)]);
    expect(JSON.parse(response.body).error.data).toMatchObject({ supported: ['2026-07-28'], requested: '1999-01-01' });
  });

  it('a batch: every request answered, the refused one with its reason, none forwarded', () => {
    const messages = [call('list_agents', 1), call('place_outbound_call', 2), call('get_agent_status'), call('get_agent_status', 'x')];
    const response = mcpRefusalResponse({ code: 'insufficient_scope', detail: 'The API key lacks the scope mcp:calls', scope: 'mcp:calls', messageIndex: 1 }, messages, true);
    const body = JSON.parse(response.body) as Array<{ id: unknown; error: { message: string; data: { code: string } } }>;
    expect(response.status).toBe(403);
    expect(body.map((answer) => answer.id)).toEqual([1, 2, 'x']);
    expect(body.every((answer) => answer.error.data.code === 'insufficient_scope')).toBe(true);
    expect(body[1]!.error.message).toBe('The API key lacks the scope mcp:calls');
    expect(body[0]!.error.message).toMatch(/^Not forwarded: message 1 of the batch was refused/);
  });

  it('a refused notification in a batch is answered with id null', () => {
    const response = mcpRefusalResponse({ code: 'unknown_tool', detail: 'Unknown tool', messageIndex: 0 }, [call('nope'), call('list_agents', 5)], true);
    expect(JSON.parse(response.body).map((answer: { id: unknown }) => answer.id)).toEqual([null, 5]);
  });

  it('a batch of notifications still gets an error body', () => {
    const response = mcpRefusalResponse({ code: 'unknown_tool', detail: 'Unknown tool', messageIndex: 1 }, [call('list_agents'), call('nope')], true);
    expect(JSON.parse(response.body)).toMatchObject([{ id: null, error: { data: { code: 'unknown_tool' } } }]);
  });

  it('a batch refused as a whole (no message to blame) is answered with one error, id null', () => {
    const response = mcpRefusalResponse({ code: 'session_mismatch', detail: 'x' }, [call('list_agents', 1), call('list_agents', 2)], true);
    const body = JSON.parse(response.body) as Array<{ id: unknown; error: { message: string } }>;
    expect(body.map((answer) => answer.id)).toEqual([1, 2]);
    expect(body.map((answer) => answer.error.message)).toEqual(['x', 'x']);
  });

  it('a body that could not be parsed: id null', () => {
    const response = mcpRequestRefusal(new GatewayError('bad_request', 'The body is not valid JSON'));
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32700, message: 'The body is not valid JSON', data: { code: 'bad_request', status: 400, detail: 'The body is not valid JSON' } },
    });
  });

  it('an invalid id (an object) is answered with null', () => {
    const response = mcpRefusalResponse({ code: 'unknown_tool', detail: 'x', messageIndex: 0 }, [{ jsonrpc: '2.0', id: { a: 1 }, method: 'tools/call' }]);
    expect(JSON.parse(response.body).id).toBeNull();
  });
});
