/** Assertions on tool results shared by the tool tests. */
import assert from 'node:assert/strict';
import type { ToolResult } from '../../src/tool.ts';

/** The text of an `ok` result (fails the test otherwise). */
export const text = (result: ToolResult): string => {
  assert.equal(result.kind, 'ok', JSON.stringify(result));
  return result.kind === 'ok' ? result.text : '';
};

/** The message of an `error` result (fails the test otherwise). */
export const error = (result: ToolResult): string => {
  assert.equal(result.kind, 'error', JSON.stringify(result));
  return result.kind === 'error' ? result.message : '';
};
