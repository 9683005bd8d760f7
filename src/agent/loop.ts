/**
 * One agent loop: call the model; while it asks for tools, check and run them and give it
 * the results; stop at `maxIterations`. Native function calling or XML in the prompt (and
 * an automatic switch to XML when an endpoint rejects native tools). A context-window error
 * compacts the conversation and tries once more. A call that needs the person's approval
 * either pauses the loop (the main agent) or is refused (sub-agents cannot ask).
 */
import { ProviderError, type AssistantMessage, type ChatMessage, type Provider, type ToolCall, type ToolSpec } from '../provider.ts';
import type { OutboundFile } from '../channel.ts';
import type { ToolContext } from '../tool.ts';
import { compactHistory, compactTurn, compactionNote } from './compaction.ts';
import { resultText, type PreparedCall, type ToolRunner } from './tool-runner.ts';
import { parseToolCalls, renderToolInstructions, renderToolResults } from './xml-tools.ts';

export type ToolCallingMode = 'auto' | 'native' | 'xml';

export interface LoopInput {
  readonly provider: Provider;
  readonly runner: ToolRunner;
  readonly system: string;
  readonly history: readonly ChatMessage[];
  /** This turn's messages so far: the user's message, or a paused turn's state. */
  readonly turn: readonly ChatMessage[];
  readonly ctx: ToolContext;
  readonly maxIterations: number;
  /** Model calls already made in this turn (when resuming). */
  readonly iteration: number;
  readonly xml: boolean;
  /** `pause`: return the calls that need approval; `deny`: refuse them. */
  readonly onAsk: 'pause' | 'deny';
  readonly model?: string;
  /** Streams the model's text as it arrives (the agent's reply preview). */
  readonly onTextDelta?: (delta: string) => void;
  /** Told about a photo of the request the model could not be shown (see ChatRequest.onImageProblem). */
  readonly onImageProblem?: (path: string, line: string) => void;
  /** Called when an `auto` endpoint turned out not to support native tools. */
  readonly onXmlFallback?: () => void;
}

export type LoopOutcome =
  | { readonly kind: 'done'; readonly reply: string; readonly turn: ChatMessage[] }
  | { readonly kind: 'paused'; readonly turn: ChatMessage[]; readonly calls: PreparedCall[]; readonly iteration: number; readonly xml: boolean };

export async function runLoop(input: LoopInput): Promise<LoopOutcome> {
  const specs: ToolSpec[] = input.runner.tools.map(({ name, description, parameters }) => ({ name, description, parameters }));
  const turn = [...input.turn];
  let history = [...input.history];
  let xml = input.xml;
  let compacted = false;
  let system = input.system;

  for (let iteration = input.iteration; iteration < input.maxIterations; iteration++) {
    let response;
    try {
      response = await input.provider.chat(
        {
          system: xml && specs.length > 0 ? `${system}\n\n${renderToolInstructions(specs)}` : system,
          messages: [...history, ...turn],
          tools: xml ? [] : specs,
          ...(input.model === undefined ? {} : { model: input.model }),
          ...(input.onTextDelta === undefined ? {} : { onTextDelta: input.onTextDelta }),
          ...(input.onImageProblem === undefined ? {} : { onImageProblem: input.onImageProblem }),
        },
        input.ctx.signal,
      );
    } catch (error) {
      if (error instanceof ProviderError && error.code === 'tools_unsupported' && !xml && specs.length > 0 && input.onXmlFallback) {
        input.ctx.log.warn({ err: error }, 'the endpoint rejects native tool calling; switching to XML tool calls');
        input.onXmlFallback();
        xml = true;
        iteration--;
        continue;
      }
      if (error instanceof ProviderError && error.code === 'context_length' && !compacted) {
        compacted = true;
        const before = history.length;
        history = compactHistory(history);
        turn.splice(0, turn.length, ...compactTurn(turn));
        system = `${system}\n\n${compactionNote}`;
        input.ctx.log.warn({ droppedMessages: before - history.length }, 'conversation too long for the model; compacted it and trying once more');
        iteration--;
        continue;
      }
      throw error;
    }

    const { calls, text, errors } = xml ? parseToolCalls(response.text) : { calls: response.toolCalls, text: response.text, errors: [] as string[] };
    if (calls.length === 0 && errors.length === 0) {
      turn.push({ role: 'assistant', content: response.text });
      return { kind: 'done', reply: text, turn };
    }
    const assistant: AssistantMessage = xml ? { role: 'assistant', content: response.text } : { role: 'assistant', content: response.text, toolCalls: calls };
    turn.push(assistant);

    const prepared = await Promise.all(calls.map((call) => input.runner.prepare(call, input.ctx)));
    if (prepared.some((call) => call.outcome === 'ask')) {
      if (input.onAsk === 'pause') return { kind: 'paused', turn, calls: prepared, iteration, xml };
    }
    const results = await runPrepared(prepared, input.runner, input.ctx, input.onAsk === 'deny' ? 'refuse' : 'run');
    turn.push(...resultMessages(calls, results, xml, errors));
  }
  input.ctx.log.warn({ maxToolIterations: input.maxIterations }, 'tool loop bound reached');
  const reply = `I stopped after ${input.maxIterations} rounds of tool calls without reaching an answer. Please narrow the request or ask me to continue.`;
  turn.push({ role: 'assistant', content: reply });
  return { kind: 'done', reply, turn };
}

/**
 * Runs prepared calls in parallel. Calls waiting for approval are run (`run`, the person
 * said yes), refused (`refuse`), or given `declined` as their result.
 */
export async function runPrepared(
  prepared: readonly PreparedCall[],
  runner: ToolRunner,
  ctx: ToolContext,
  asked: 'run' | 'refuse' | { declined: string },
): Promise<string[]> {
  // Files a call sends are kept apart and handed on in the order of the calls: the calls run
  // at once, and a later send_file whose checks finish first must not go out first.
  const sent: OutboundFile[][] = prepared.map(() => []);
  const results = await Promise.all(
    prepared.map(async (call, index) => {
      if (call.outcome === 'ask' && asked !== 'run') {
        return asked === 'refuse'
          ? resultText({ kind: 'error', message: `"${call.summary}" needs a person's approval, which a sub-agent cannot ask for. Leave it to the main conversation.` })
          : resultText({ kind: 'error', message: asked.declined });
      }
      const own: ToolContext = ctx.sendFile ? { ...ctx, sendFile: (file) => void sent[index]!.push(file) } : ctx;
      return resultText(await runner.run(call.outcome === 'ask' ? { call: call.call, outcome: 'run', args: call.args } : call, own));
    }),
  );
  for (const file of sent.flat()) ctx.sendFile?.(file);
  return results;
}

/** Tool results as conversation messages: native `tool` messages, or one XML user message. */
export function resultMessages(calls: readonly ToolCall[], results: readonly string[], xml: boolean, parseErrors: readonly string[] = []): ChatMessage[] {
  if (xml) {
    const items = calls.map((call, index) => ({ name: call.name, content: results[index] ?? '' }));
    for (const error of parseErrors) items.push({ name: 'invalid_tool_call', content: `Error: ${error}` });
    return [{ role: 'user', content: renderToolResults(items) }];
  }
  return calls.map((call, index) => ({ role: 'tool', toolCallId: call.id, name: call.name, content: results[index] ?? '' }));
}
