/**
 * Prompt-guided tool calling for models without native function calling: the tools are
 * described in the system prompt, the model writes `<tool_call>{json}</tool_call>`, and the
 * results go back as `<tool_result name="…">…</tool_result>` in a user message.
 */
import type { ToolCall, ToolSpec } from '../provider.ts';

export interface ParsedToolCalls {
  /** The reply with every `<tool_call>` block removed. */
  readonly text: string;
  /** Well-formed calls in order, ids `xml_1`, `xml_2`, … (numbered per reply). */
  readonly calls: ToolCall[];
  /** One sentence per malformed call, for the agent to send back so the model can correct it. */
  readonly errors: string[];
}

const callFormat = '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>';

/** The system-prompt section describing `tools` and the call format; '' when there are none. */
export function renderToolInstructions(tools: readonly ToolSpec[]): string {
  if (tools.length === 0) return '';
  const list = tools.map((tool) => `- ${tool.name}: ${oneLine(tool.description)}\n  parameters: ${JSON.stringify(tool.parameters)}`);
  return [
    '## Tools',
    '',
    'You can use the tools below. To call one, write exactly:',
    callFormat,
    'The tag holds one JSON object: "name" is the tool name, "arguments" an object matching its parameters. Use double quotes (strict JSON).',
    'Write one tag per call; several tags in one reply are allowed. After your calls, stop and wait: each result comes back in a user message as',
    '<tool_result name="TOOL_NAME">…</tool_result>. Never write <tool_result> yourself. When no tool is needed, just answer.',
    '',
    'Available tools:',
    ...list,
  ].join('\n');
}

/**
 * Extracts `<tool_call>` blocks from a model reply. Tolerates whitespace, a ```json fence
 * inside the tag, `arguments` given as an object or a JSON string, `parameters` as an alias,
 * several calls, and a final tag left unclosed. Not strict JSON (e.g. single quotes) is
 * reported in `errors`, never guessed at.
 */
export function parseToolCalls(text: string): ParsedToolCalls {
  const calls: ToolCall[] = [];
  const errors: string[] = [];
  // [^<>]: an attempt that finds no ">" stops at the next "<" (with [^>] a reply of many "<tool_call " took quadratic time)
  const tag = /<tool_call\b[^<>]*>([\s\S]*?)(?:<\/tool_call\s*>|$)/gi;
  let block = 0;
  const rest = text.replace(tag, (_match, body: string) => {
    block++;
    const objects = jsonObjects(body);
    if (objects.error) errors.push(`tool call ${block}: ${objects.error}: ${snippet(body)}`);
    for (const source of objects.found) {
      const parsed = toCall(source);
      if (typeof parsed === 'string') errors.push(`tool call ${block}: ${parsed}: ${snippet(source)}`);
      else calls.push({ id: `xml_${calls.length + 1}`, ...parsed });
    }
    return '';
  });
  const cleaned = rest
    .replace(/```[\w-]*\s*```/g, '') // a fence that only held a call
    .split('\n')
    .map(trimEndBlanks)
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
  return { text: cleaned, calls, errors };
}

/** The user-message text carrying tool results back to the model. */
export function renderToolResults(results: ReadonlyArray<{ readonly name: string; readonly content: string }>): string {
  return results
    .map(({ name, content }) => {
      // A result quoting our own closing tag (e.g. a file read of this source) must not end the block early.
      const body = content.replace(/<\/tool_result/gi, '<\\/tool_result');
      return `<tool_result name="${escapeAttribute(name)}">\n${body}\n</tool_result>`;
    })
    .join('\n\n');
}

/** A call's name and arguments, or what is wrong with it. */
function toCall(source: string): { name: string; arguments: string } | string {
  let value: unknown;
  try {
    value = JSON.parse(source);
  } catch (error) {
    const hint = /'/.test(source) ? ' (use double quotes: single quotes are not JSON)' : '';
    return `not valid JSON${hint} — ${error instanceof Error ? error.message : String(error)}`;
  }
  if (!isObject(value)) return 'expected a JSON object';
  if (typeof value.name !== 'string' || value.name.trim() === '') return 'missing "name" (the tool name as a string)';
  const raw = 'arguments' in value ? value.arguments : value.parameters;
  let args: unknown = raw ?? {};
  if (typeof raw === 'string') {
    try {
      args = raw.trim() === '' ? {} : JSON.parse(raw);
    } catch {
      return `"arguments" of ${value.name} is a string that is not valid JSON`;
    }
  }
  if (!isObject(args)) return `"arguments" of ${value.name} must be a JSON object`;
  return { name: value.name.trim(), arguments: JSON.stringify(args) };
}

/**
 * The top-level `{…}` spans in `body` (strings and escapes respected), so fences and stray
 * prose around the JSON do not matter. `error` when there is none or one is cut off.
 */
function jsonObjects(body: string): { found: string[]; error?: string } {
  const found: string[] = [];
  let depth = 0;
  let start = -1;
  let quote: string | undefined;
  for (let i = 0; i < body.length; i++) {
    const char = body[i]!;
    if (quote) {
      if (char === '\\') i++;
      else if (char === quote) quote = undefined;
    } else if (char === '"' || (char === "'" && depth > 0)) {
      quote = char;
    } else if (char === '{') {
      if (depth++ === 0) start = i;
    } else if (char === '}' && depth > 0) {
      if (--depth === 0) found.push(body.slice(start, i + 1));
    }
  }
  if (depth > 0) return { found, error: 'the JSON object is not closed (write the whole object, then </tool_call>)' };
  if (found.length === 0) return { found, error: `no JSON object found; the format is ${callFormat}` };
  return { found };
}

/**
 * A line without its trailing spaces and tabs. A loop, not /[ \t]+\n/: that regex retries at
 * every blank of a long run not followed by a newline, and a reply ending in 160 000 spaces
 * (models do degenerate into whitespace) took 24 s, blocking the daemon.
 */
function trimEndBlanks(line: string): string {
  let end = line.length;
  while (end > 0 && (line[end - 1] === ' ' || line[end - 1] === '\t')) end--;
  return end === line.length ? line : line.slice(0, end);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function snippet(text: string): string {
  const flat = oneLine(text);
  return flat.length > 160 ? `${flat.slice(0, 160)}…` : flat;
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}
