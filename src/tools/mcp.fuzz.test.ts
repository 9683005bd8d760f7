/**
 * Fuzzing MCP tool results: whatever a server answers to tools/call, after the SDK's own
 * schema check (CallToolResultSchema, as Client.callTool applies it) — and, to be safe, even
 * without it — becomes a ToolResult with a string the model reads; never a TypeError.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { anyJson, fuzz, nastyText, payload } from '../../test/support/fuzz.ts';
import type { ToolResult } from '../tool.ts';
import { mapResult } from './mcp.ts';

const part = payload({
  type: fc.constantFrom('text', 'image', 'audio', 'resource', 'resource_link', 'other'),
  text: nastyText(60),
  data: fc.base64String({ maxLength: 20 }),
  mimeType: fc.constantFrom('image/png', 'text/plain'),
  uri: fc.webUrl(),
  name: fc.string(),
  resource: payload({ uri: fc.webUrl(), text: nastyText(30), blob: fc.base64String({ maxLength: 8 }) }),
});
const result = fc.oneof(
  { weight: 4, arbitrary: payload({ content: fc.array(part, { maxLength: 4 }), isError: fc.boolean(), structuredContent: anyJson, toolResult: anyJson }) },
  { weight: 1, arbitrary: anyJson },
);

const readable = (mapped: ToolResult): boolean => (mapped.kind === 'ok' ? typeof mapped.text === 'string' : mapped.kind === 'error' ? typeof mapped.message === 'string' && mapped.message !== '' : false);

describe('mcp tool results (fuzz)', () => {
  it('a result the SDK accepted maps to text (or an error) the model can read', (t) => {
    fuzz(t, 'mcp result', result, (raw) => {
      const checked = CallToolResultSchema.safeParse(raw);
      if (!checked.success) return; // Client.callTool rejects it: the tool runner turns that into an error result
      const mapped = mapResult(checked.data);
      assert.ok(readable(mapped), JSON.stringify(mapped));
      if (checked.data.isError === true) assert.equal(mapped.kind, 'error');
    }, { runs: 500 });
  });

  it('even a result nobody checked maps to a readable ToolResult', (t) => {
    fuzz(t, 'mcp result (unchecked)', result, (raw) => {
      assert.ok(readable(mapResult(raw as Parameters<typeof mapResult>[0])));
    }, { runs: 500 });
  });
});
