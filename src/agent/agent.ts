/**
 * The agent loop: the model is called with the conversation so far; while it asks for tools
 * they run (in parallel) and their results go back to it; bounded by `maxToolIterations`.
 * Tool failures are data for the model, never a crashed turn.
 */
import type { Logger } from 'pino';
import type { InboundMessage } from '../channel.ts';
import type { AssistantMessage, ChatMessage, Provider, ToolCall, ToolResultMessage, ToolSpec } from '../provider.ts';
import type { Tool, ToolContext, ToolResult } from '../tool.ts';
import { buildSystemPrompt } from './prompt.ts';
import { sanitizeReply } from './sanitize.ts';

export interface TurnInput {
  readonly message: InboundMessage;
  readonly conversation: string;
  /** Earlier turns of this conversation, oldest first. */
  readonly history: readonly ChatMessage[];
  readonly signal: AbortSignal;
  readonly log: Logger;
}

export interface TurnOutput {
  /** Text for the user (already free of internal markup). Empty means: send nothing. */
  readonly reply: string;
  /** This turn's messages (the user's first) to append to the history. */
  readonly messages: readonly ChatMessage[];
}

/** Answers one inbound message. The runtime's only view of the agent. */
export type TurnHandler = (input: TurnInput) => Promise<TurnOutput>;

export interface AgentOptions {
  readonly provider: Provider;
  readonly tools: readonly Tool[];
  readonly name: string;
  readonly instructions: string;
  /** Absolute path of the tools' workspace. */
  readonly workspace: string;
  /** @default 10 */
  readonly maxToolIterations: number;
  /** Per tool call. @default 60000 */
  readonly toolTimeoutMs: number;
}

/** Builds the turn handler for the runtime. */
export function createAgent(options: AgentOptions): TurnHandler {
  const tools = new Map(options.tools.map((tool) => [tool.name, tool]));
  const specs: ToolSpec[] = options.tools.map(({ name, description, parameters }) => ({ name, description, parameters }));

  return async ({ message, conversation, history, signal, log }) => {
    const system = buildSystemPrompt(options, message);
    const user: ChatMessage = { role: 'user', content: message.text };
    const turn: ChatMessage[] = [user];
    for (let iteration = 0; iteration < options.maxToolIterations; iteration++) {
      const response = await options.provider.chat({ system, messages: [...history, ...turn], tools: specs }, signal);
      const assistant: AssistantMessage =
        response.toolCalls.length > 0
          ? { role: 'assistant', content: response.text, toolCalls: response.toolCalls }
          : { role: 'assistant', content: response.text };
      turn.push(assistant);
      if (response.toolCalls.length === 0) return { reply: sanitizeReply(response.text), messages: turn };
      const results = await Promise.all(
        response.toolCalls.map((call) =>
          runTool(tools, call, { conversation, channel: message.channel, senderId: message.sender.id, workspace: options.workspace, signal, log }, options.toolTimeoutMs),
        ),
      );
      turn.push(...results);
    }
    log.warn({ maxToolIterations: options.maxToolIterations }, 'tool loop bound reached');
    const reply = `I stopped after ${options.maxToolIterations} rounds of tool calls without reaching an answer. Please narrow the request or ask me to continue.`;
    turn.push({ role: 'assistant', content: reply });
    return { reply, messages: turn };
  };
}

async function runTool(
  tools: ReadonlyMap<string, Tool>,
  call: ToolCall,
  ctx: ToolContext,
  timeoutMs: number,
): Promise<ToolResultMessage> {
  const log = ctx.log.child({ tool: call.name, toolCallId: call.id });
  const started = Date.now();
  const result = await executeTool(tools, call, { ...ctx, log }, timeoutMs);
  log.info({ outcome: result.kind, ms: Date.now() - started }, 'tool call');
  return { role: 'tool', toolCallId: call.id, name: call.name, content: resultText(result) };
}

async function executeTool(
  tools: ReadonlyMap<string, Tool>,
  call: ToolCall,
  ctx: ToolContext,
  timeoutMs: number,
): Promise<ToolResult> {
  const tool = tools.get(call.name);
  if (!tool) {
    return { kind: 'error', message: `There is no tool named "${call.name}". Available tools: ${[...tools.keys()].join(', ') || 'none'}.` };
  }
  let args: unknown;
  try {
    args = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
  } catch {
    return { kind: 'error', message: `The arguments for ${call.name} are not valid JSON: ${call.arguments.slice(0, 200)}` };
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    return { kind: 'error', message: `The arguments for ${call.name} must be a JSON object.` };
  }
  const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(timeoutMs)]);
  try {
    // A tool that ignores its signal must not hold the turn: stop waiting when it aborts.
    return await Promise.race([tool.execute(args as Record<string, unknown>, { ...ctx, signal }), rejectOnAbort(signal)]);
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    ctx.log.warn({ err: error }, 'tool threw');
    const reason = signal.aborted ? `timed out after ${Math.round(timeoutMs / 1000)} s` : error instanceof Error ? error.message : String(error);
    return { kind: 'error', message: `${call.name} failed: ${reason}` };
  }
}

function rejectOnAbort(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = (): void => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

function resultText(result: ToolResult): string {
  switch (result.kind) {
    case 'ok':
      return result.text;
    case 'error':
      return `Error: ${result.message}`;
    case 'effect':
      return result.summary ?? 'Done.';
  }
}
