/**
 * `delegate`: hands a task to a named sub-agent from `[agents.<name>]` — its own instructions,
 * model and tool subset — and returns its answer. Depth-limited (a sub-agent may only
 * delegate further while depth < max) and bounded by a timeout. Sub-agents cannot ask a
 * person for approval: such calls are refused to them.
 */
import { runLoop } from '../agent/loop.ts';
import { sanitizeReply } from '../agent/sanitize.ts';
import type { ToolRunner } from '../agent/tool-runner.ts';
import type { Provider } from '../provider.ts';
import { ok, toolError, type Tool } from '../tool.ts';

export interface SubAgentSpec {
  readonly description: string;
  readonly instructions: string;
  /** Model or "hint:<name>"; undefined = the provider's own. */
  readonly model?: string;
  /** The sub-agent's tools, already built for its depth. */
  readonly runner: ToolRunner;
  readonly maxToolIterations: number;
  readonly timeoutMs: number;
}

export interface DelegateToolOptions {
  readonly provider: Provider;
  readonly agents: ReadonlyMap<string, SubAgentSpec>;
  /** Use XML tool calls for sub-agents (when the main agent does). */
  readonly xml: boolean;
}

export function createDelegateTool(options: DelegateToolOptions): Tool<{ agent: string; task: string }> {
  const names = [...options.agents.keys()];
  return {
    name: 'delegate',
    timeoutMs: Math.max(...[...options.agents.values()].map((spec) => spec.timeoutMs)) + 5000,
    description: `Hand a self-contained task to a sub-agent and get its answer back. Sub-agents: ${[...options.agents].map(([name, spec]) => `${name} — ${spec.description}`).join('; ')}.`,
    parameters: {
      type: 'object',
      properties: {
        agent: { type: 'string', enum: names },
        task: { type: 'string', description: 'The whole task, with every detail the sub-agent needs; it does not see this conversation.' },
      },
      required: ['agent', 'task'],
      additionalProperties: false,
    },
    assess: (args) => ({ risk: 'low', mutates: false, summary: `delegate: ${args.agent}` }),
    async execute(args, ctx) {
      const spec = options.agents.get(args.agent);
      if (!spec) return toolError(`There is no sub-agent "${args.agent}"; choose one of ${names.join(', ')}.`);
      const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(spec.timeoutMs)]);
      const log = ctx.log.child({ subAgent: args.agent });
      try {
        const outcome = await runLoop({
          provider: options.provider,
          runner: spec.runner,
          system: [
            `You are "${args.agent}", a sub-agent. ${spec.description}`,
            spec.instructions,
            'You get one task. Do it with your tools and reply with the result only; no one can answer questions.',
          ]
            .filter(Boolean)
            .join('\n'),
          history: [],
          turn: [{ role: 'user', content: args.task }],
          ctx: { ...ctx, signal, log },
          maxIterations: spec.maxToolIterations,
          iteration: 0,
          xml: options.xml,
          onAsk: 'deny',
          ...(spec.model === undefined ? {} : { model: spec.model }),
        });
        return outcome.kind === 'done' ? ok(`${args.agent} answered:\n${sanitizeReply(outcome.reply)}`) : toolError(`${args.agent} stopped without an answer.`);
      } catch (error) {
        if (ctx.signal.aborted) throw error;
        const reason = signal.aborted ? `no answer within ${Math.round(spec.timeoutMs / 1000)} s` : error instanceof Error ? error.message : String(error);
        log.warn({ err: error }, 'sub-agent failed');
        return toolError(`${args.agent} failed: ${reason}`);
      }
    },
  };
}
