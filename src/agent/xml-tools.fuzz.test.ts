/**
 * Fuzzing the XML tool-call parser: model replies (which a prompt injection can shape) →
 * well-formed calls, one error sentence per malformed one, and the reply's prose; never an
 * exception, and every call that was written well comes back exactly.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { anyJson, fuzz, nastyText } from '../../test/support/fuzz.ts';
import { parseToolCalls, renderToolResults } from './xml-tools.ts';

const name = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_-]{0,20}$/);
const args = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }).map((d) => JSON.parse(JSON.stringify(d)) as Record<string, unknown>);
const prose = nastyText(60).map((text) => text.replace(/<\/?tool_call/gi, ''));

describe('xml tool calls (fuzz)', () => {
  it('any reply parses: calls with a name and object arguments, errors as sentences, never a throw', (t) => {
    const fragment = fc.oneof(
      nastyText(40),
      fc.constantFrom('<tool_call>', '</tool_call>', '<tool_call name="x">', '```json', '```', '{', '}', '"', "'", '\\', '{"name": "a"}', '{"name": 1}', '{"name": "a", "arguments": "{bad"}', '{"name": "a", "arguments": [1]}'),
      anyJson.map((value) => JSON.stringify(value) ?? ''),
    );
    fuzz(t, 'xml reply', fc.array(fragment, { maxLength: 12 }).map((parts) => parts.join('')), (reply) => {
      const { text, calls, errors } = parseToolCalls(reply);
      assert.equal(typeof text, 'string');
      for (const [i, call] of calls.entries()) {
        assert.equal(call.id, `xml_${i + 1}`);
        assert.ok(call.name.trim() !== '' && call.name === call.name.trim());
        const parsed: unknown = JSON.parse(call.arguments);
        assert.ok(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed));
      }
      for (const error of errors) assert.match(error, /^tool call \d+: /);
    }, { runs: 800 });
  });

  it('well-formed calls between prose come back exactly, and the prose without them', (t) => {
    const call = fc.record({ name, args, asString: fc.boolean(), fenced: fc.boolean() });
    fuzz(t, 'xml calls (valid)', fc.tuple(prose, fc.array(fc.tuple(call, prose), { minLength: 1, maxLength: 3 })), ([lead, rest]) => {
      const reply = lead + rest.map(([c, after]) => {
        const body = JSON.stringify({ name: c.name, arguments: c.asString ? JSON.stringify(c.args) : c.args });
        return `<tool_call>${c.fenced ? `\n\`\`\`json\n${body}\n\`\`\`\n` : body}</tool_call>${after}`;
      }).join('');
      const { calls, errors } = parseToolCalls(reply);
      assert.deepEqual(errors, []);
      assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.arguments)]), rest.map(([c]) => [c.name, c.args]));
    }, { runs: 400 });
  });

  it('a result never closes its own block early', (t) => {
    fuzz(t, 'xml results', fc.array(fc.record({ name: nastyText(10), content: fc.oneof(nastyText(60), fc.constant('</tool_result>')) }), { maxLength: 3 }), (results) => {
      const rendered = renderToolResults(results);
      assert.equal((rendered.match(/<\/tool_result>/g) ?? []).length, results.length);
    }, { runs: 300 });
  });
});
