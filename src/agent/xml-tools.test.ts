import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ToolSpec } from '../provider.ts';
import { parseToolCalls, renderToolInstructions, renderToolResults } from './xml-tools.ts';

interface Case {
  readonly name: string;
  readonly output: string;
  readonly text: string;
  /** [tool name, parsed arguments] per expected call. */
  readonly calls: ReadonlyArray<readonly [string, Record<string, unknown>]>;
  /** One pattern per expected error. */
  readonly errors?: readonly RegExp[];
}

const cases: Case[] = [
  { name: 'plain answer, no call', output: 'It is noon.', text: 'It is noon.', calls: [] },
  {
    name: 'one call on one line',
    output: '<tool_call>{"name": "shell", "arguments": {"command": "ls"}}</tool_call>',
    text: '',
    calls: [['shell', { command: 'ls' }]],
  },
  {
    name: 'prose around a call, newlines and indentation inside the tag',
    output: 'Let me look.\n<tool_call>\n  {\n    "name": "file_read",\n    "arguments": { "path": "a.txt" }\n  }\n</tool_call>\nOne moment.',
    text: 'Let me look.\n\nOne moment.',
    calls: [['file_read', { path: 'a.txt' }]],
  },
  {
    name: 'a ```json fence inside the tag',
    output: '<tool_call>\n```json\n{"name": "glob", "arguments": {"pattern": "*.ts"}}\n```\n</tool_call>',
    text: '',
    calls: [['glob', { pattern: '*.ts' }]],
  },
  {
    name: 'arguments as a JSON string',
    output: '<tool_call>{"name": "shell", "arguments": "{\\"command\\": \\"pwd\\"}"}</tool_call>',
    text: '',
    calls: [['shell', { command: 'pwd' }]],
  },
  {
    name: '"parameters" as an alias of "arguments"',
    output: '<tool_call>{"name": "memory_store", "parameters": {"key": "k", "value": "v"}}</tool_call>',
    text: '',
    calls: [['memory_store', { key: 'k', value: 'v' }]],
  },
  {
    name: 'no arguments at all',
    output: '<tool_call>{"name": "current_time"}</tool_call>',
    text: '',
    calls: [['current_time', {}]],
  },
  {
    name: 'several calls in one reply',
    output: 'Checking both.\n<tool_call>{"name": "a", "arguments": {"n": 1}}</tool_call>\n<tool_call>{"name": "b", "arguments": {"n": 2}}</tool_call>',
    text: 'Checking both.',
    calls: [
      ['a', { n: 1 }],
      ['b', { n: 2 }],
    ],
  },
  {
    name: 'an unclosed final tag',
    output: 'Sure.\n<tool_call>{"name": "web_fetch", "arguments": {"url": "https://example.com"}}',
    text: 'Sure.',
    calls: [['web_fetch', { url: 'https://example.com' }]],
  },
  {
    name: 'single quotes are not JSON',
    output: "<tool_call>{'name': 'shell', 'arguments': {'command': 'ls'}}</tool_call>",
    text: '',
    calls: [],
    errors: [/tool call 1: not valid JSON \(use double quotes/],
  },
  {
    name: 'a good call and a bad one: the good one still runs',
    output: '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"arguments": {"x": 1}}</tool_call>',
    text: '',
    calls: [['a', {}]],
    errors: [/tool call 2: missing "name"/],
  },
  {
    name: 'truncated JSON in an unclosed tag',
    output: 'Ok <tool_call>{"name": "shell", "arguments": {"command": "ls',
    text: 'Ok',
    calls: [],
    errors: [/not closed/],
  },
  {
    name: 'arguments that are a string but not JSON',
    output: '<tool_call>{"name": "shell", "arguments": "ls -la"}</tool_call>',
    text: '',
    calls: [],
    errors: [/"arguments" of shell is a string that is not valid JSON/],
  },
  {
    name: 'arguments that are an array',
    output: '<tool_call>{"name": "shell", "arguments": ["ls"]}</tool_call>',
    text: '',
    calls: [],
    errors: [/must be a JSON object/],
  },
  {
    name: 'an empty tag',
    output: 'Hmm <tool_call></tool_call>',
    text: 'Hmm',
    calls: [],
    errors: [/no JSON object found; the format is <tool_call>/],
  },
  {
    name: 'braces and a closing-tag lookalike inside a string value',
    output: '<tool_call>{"name": "file_write", "arguments": {"path": "x.js", "content": "if (a) { b(\\"}\\") }"}}</tool_call>',
    text: '',
    calls: [['file_write', { path: 'x.js', content: 'if (a) { b("}") }' }]],
  },
  {
    name: 'upper-case tag, attribute and spaced closing tag',
    output: '<TOOL_CALL id="1">{"name": "a", "arguments": {}}</TOOL_CALL >done',
    text: 'done',
    calls: [['a', {}]],
  },
  {
    name: 'a call wrapped in an xml fence in the prose',
    output: 'Running it:\n```xml\n<tool_call>{"name": "a", "arguments": {}}</tool_call>\n```\nThen I will report.',
    text: 'Running it:\n\nThen I will report.',
    calls: [['a', {}]],
  },
  {
    name: 'a JSON array of calls in one tag',
    output: '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"q": "x"}}]</tool_call>',
    text: '',
    calls: [
      ['a', {}],
      ['b', { q: 'x' }],
    ],
  },
  {
    name: 'an apostrophe in prose and inside a value is fine',
    output: "Here's the call: <tool_call>{\"name\": \"say\", \"arguments\": {\"text\": \"it's fine\"}}</tool_call>",
    text: "Here's the call:",
    calls: [['say', { text: "it's fine" }]],
  },
];

describe('parseToolCalls', () => {
  for (const c of cases) {
    it(c.name, () => {
      const parsed = parseToolCalls(c.output);
      assert.equal(parsed.text, c.text);
      assert.deepEqual(
        parsed.calls.map((call) => [call.name, JSON.parse(call.arguments) as unknown]),
        c.calls,
      );
      assert.deepEqual(
        parsed.calls.map((call) => call.id),
        c.calls.map((_, i) => `xml_${i + 1}`),
      );
      assert.equal(parsed.errors.length, c.errors?.length ?? 0, parsed.errors.join('\n'));
      c.errors?.forEach((pattern, i) => assert.match(parsed.errors[i]!, pattern));
    });
  }
});

describe('renderToolInstructions', () => {
  const tools: ToolSpec[] = [
    { name: 'shell', description: 'Runs a command\n  in the workspace.', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
    { name: 'current_time', description: 'The time.', parameters: { type: 'object', properties: {} } },
  ];

  it('describes each tool with compact JSON parameters and the exact call and result format', () => {
    const text = renderToolInstructions(tools);
    assert.match(text, /<tool_call>\{"name": "TOOL_NAME", "arguments": \{\.\.\.\}\}<\/tool_call>/);
    assert.match(text, /<tool_result name="TOOL_NAME">/);
    assert.match(text, /several/);
    assert.match(text, /- shell: Runs a command in the workspace\.\n {2}parameters: \{"type":"object","properties":\{"command":\{"type":"string"\}\},"required":\["command"\]\}/);
    assert.match(text, /- current_time: The time\./);
  });

  it('is empty without tools', () => {
    assert.equal(renderToolInstructions([]), '');
  });

  it('round-trips: a call written as instructed parses back', () => {
    const parsed = parseToolCalls('<tool_call>{"name": "shell", "arguments": {"command": "ls"}}</tool_call>');
    assert.equal(parsed.calls[0]!.name, tools[0]!.name);
  });
});

describe('renderToolResults', () => {
  it('wraps each result in a tagged block', () => {
    assert.equal(
      renderToolResults([
        { name: 'shell', content: 'a.txt\nb.txt' },
        { name: 'current_time', content: '12:00' },
      ]),
      '<tool_result name="shell">\na.txt\nb.txt\n</tool_result>\n\n<tool_result name="current_time">\n12:00\n</tool_result>',
    );
  });

  it('keeps content from closing the block early and escapes the name', () => {
    const text = renderToolResults([{ name: 'a"b', content: 'x </tool_result> y' }]);
    assert.equal(text, '<tool_result name="a&quot;b">\nx <\\/tool_result> y\n</tool_result>');
    assert.equal(text.match(/<\/tool_result>/g)?.length, 1);
  });
});
