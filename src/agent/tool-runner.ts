/**
 * Prepares and runs the model's tool calls: finds the tool, parses and validates the
 * arguments, asks the security policy (allow / ask the person / deny), applies the per-sender
 * rate limit, runs with a timeout, and offloads large output to a file in the workspace.
 * Every failure becomes an error result the model can read; nothing here throws for a bad call.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { deadline, untilAborted } from '../abort.ts';
import type { ToolCall } from '../provider.ts';
import type { Tool, ToolAssessment, ToolContext, ToolResult } from '../tool.ts';
import type { ArgsValidator } from './validate.ts';

/** What the security policy says about one call. */
export type ToolDecision = { readonly kind: 'allow' } | { readonly kind: 'ask' } | { readonly kind: 'deny'; readonly reason: string };

/** A call after checking: ready to run, waiting for the person, or already answered. */
export type PreparedCall =
  | { readonly call: ToolCall; readonly outcome: 'run'; readonly args: Record<string, unknown> }
  | { readonly call: ToolCall; readonly outcome: 'ask'; readonly args: Record<string, unknown>; readonly summary: string }
  | { readonly call: ToolCall; readonly outcome: 'done'; readonly result: ToolResult };

/**
 * Tools that may change between turns (MCP servers coming and going, remote tools of connected
 * clients). `tools()` is read once at the start of each turn and again for each call.
 * Return the same array while nothing changed: the runner indexes it by identity.
 */
export interface ToolList {
  tools(): readonly Tool[];
}

export interface ToolRunnerOptions {
  /** A fixed list, or a list read anew for each turn. */
  readonly tools: readonly Tool[] | ToolList;
  readonly validator: ArgsValidator;
  /** The autonomy policy. */
  readonly decide: (assessment: ToolAssessment) => ToolDecision;
  /** Whether this person said "always" to this exact summary before. */
  readonly alwaysApproved: (ctx: ToolContext, summary: string) => boolean | Promise<boolean>;
  /** Per-sender limit on tool calls; omitted = unlimited. */
  readonly rateLimit?: (senderKey: string) => { ok: true } | { ok: false; retryAfterMs: number };
  /** Per call, unless the tool sets its own. */
  readonly timeoutMs: number;
  /** Longer ok text is written to a file and the model gets the head and a pointer. @default 4000 */
  readonly maxResultChars?: number;
}

export interface ToolRunner {
  /** The tools right now (a fresh read of a ToolList). */
  readonly tools: readonly Tool[];
  prepare(call: ToolCall, ctx: ToolContext): Promise<PreparedCall>;
  /** Runs a prepared call (an `ask` one only once the person approved it). */
  run(prepared: PreparedCall, ctx: ToolContext): Promise<ToolResult>;
}

const defaultAssessment = (tool: Tool): ToolAssessment => ({ risk: 'low', mutates: false, summary: tool.name });

const isToolList = (tools: readonly Tool[] | ToolList): tools is ToolList => typeof (tools as Partial<ToolList>).tools === 'function';

export function createToolRunner(options: ToolRunnerOptions): ToolRunner {
  const source = options.tools;
  let indexed: readonly Tool[] | undefined;
  let index = new Map<string, Tool>();
  const current = (): readonly Tool[] => (isToolList(source) ? source.tools() : source);
  const byName = (): Map<string, Tool> => {
    const tools = current();
    if (tools !== indexed) {
      indexed = tools;
      index = new Map(tools.map((tool) => [tool.name, tool]));
    }
    return index;
  };
  const maxChars = options.maxResultChars ?? 4000;
  const done = (call: ToolCall, message: string): PreparedCall => ({ call, outcome: 'done', result: { kind: 'error', message } });

  return {
    get tools() {
      return current();
    },

    async prepare(call, ctx) {
      const tools = byName();
      const tool = tools.get(call.name);
      if (!tool) return done(call, `There is no tool named "${call.name}". Available tools: ${[...tools.keys()].join(', ') || 'none'}.`);
      let args: unknown;
      try {
        args = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
      } catch {
        return done(call, `The arguments for ${call.name} are not valid JSON: ${call.arguments.slice(0, 200)}`);
      }
      if (typeof args !== 'object' || args === null || Array.isArray(args)) return done(call, `The arguments for ${call.name} must be a JSON object.`);
      let invalid: string | undefined;
      try {
        invalid = await options.validator.validate(tool, args);
      } catch (error) {
        // A schema that does not compile (an MCP server's or a remote client's): the call cannot be checked, so it does not run.
        return done(call, `${call.name} cannot be used: its parameter schema is invalid (${error instanceof Error ? error.message : String(error)}).`);
      }
      if (invalid) return done(call, invalid);
      const record = args as Record<string, unknown>;
      let assessment: ToolAssessment;
      try {
        assessment = tool.assess ? tool.assess(record, ctx) : defaultAssessment(tool);
      } catch (error) {
        return done(call, `${call.name} could not judge this call: ${error instanceof Error ? error.message : String(error)}`);
      }
      const decision = options.decide(assessment);
      if (decision.kind === 'deny') return done(call, `Not allowed: ${decision.reason}`);
      if (options.rateLimit) {
        const limit = options.rateLimit(`${ctx.channel}:${ctx.senderId}`);
        if (!limit.ok) return done(call, `Tool-call limit reached for this person; try again in ${Math.ceil(limit.retryAfterMs / 60_000)} min. Tell the person.`);
      }
      if (decision.kind === 'ask' && !(await options.alwaysApproved(ctx, assessment.summary))) {
        return { call, outcome: 'ask', args: record, summary: assessment.summary };
      }
      return { call, outcome: 'run', args: record };
    },

    async run(prepared, ctx) {
      if (prepared.outcome === 'done') return prepared.result;
      const tool = byName().get(prepared.call.name);
      // Between prepare and run (an approval may take hours) a remote client or MCP server may have gone.
      if (!tool) return { kind: 'error', message: `The tool ${prepared.call.name} is no longer available (its server or client disconnected).` };
      const log = ctx.log.child({ tool: tool.name, toolCallId: prepared.call.id });
      const started = performance.now();
      const result = await execute(tool, prepared.args, { ...ctx, log }, tool.timeoutMs ?? options.timeoutMs);
      log.info({ outcome: result.kind, ms: Math.round(performance.now() - started) }, 'tool call');
      return result.kind === 'ok' && result.text.length > maxChars ? offload(result.text, tool.name, ctx, maxChars) : result;
    },
  };
}

async function execute(tool: Tool, args: Record<string, unknown>, ctx: ToolContext, timeoutMs: number): Promise<ToolResult> {
  const limit = deadline(ctx.signal, timeoutMs);
  const { signal } = limit;
  try {
    // A tool that ignores its signal must not hold the turn: stop waiting when it aborts.
    return await untilAborted(tool.execute(args, { ...ctx, signal }), signal);
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    ctx.log.warn({ err: error }, 'tool threw');
    const reason = signal.aborted ? `timed out after ${Math.round(timeoutMs / 1000)} s` : error instanceof Error ? error.message : String(error);
    return { kind: 'error', message: `${tool.name} failed: ${reason}` };
  } finally {
    limit.dispose();
  }
}

/** Writes long output to `.tool-output/` in the workspace; the model gets the head and where the rest is. */
async function offload(text: string, toolName: string, ctx: ToolContext, maxChars: number): Promise<ToolResult> {
  const name = `${toolName}-${new Date().toISOString().replace(/[:.]/g, '-')}-${Math.random().toString(36).slice(2, 6)}.txt`;
  const relative = join('.tool-output', name);
  try {
    await mkdir(join(ctx.workspace, '.tool-output'), { recursive: true });
    await writeFile(join(ctx.workspace, relative), text);
  } catch (error) {
    ctx.log.warn({ err: error }, 'could not save long tool output; truncating it instead');
    return { kind: 'ok', text: `${text.slice(0, maxChars)}\n… [output truncated: ${text.length - maxChars} more characters]` };
  }
  const head = text.slice(0, Math.floor(maxChars / 2));
  return {
    kind: 'ok',
    text: `${head}\n… [${text.length - head.length} more characters; the full output (${text.length} characters) is saved as ${relative} in the workspace — read parts of it with file_read and offset/limit]`,
  };
}

/** The text the model reads for a result. */
export function resultText(result: ToolResult): string {
  switch (result.kind) {
    case 'ok':
      return result.text;
    case 'error':
      return `Error: ${result.message}`;
    case 'effect':
      return result.summary ?? 'Done.';
  }
}
