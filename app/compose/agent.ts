/**
 * The agent: the model endpoint (metered), the tools and the turn handler, as one set a
 * reload may replace — a turn reads `parts.agent` when it starts, and a reload that only
 * changes the provider does not rebuild the tools (and drop remote-tool clients).
 */
import { createAgent, type TurnHandler, type TurnTranscription } from '../../src/agent/agent.ts';
import type { ApprovalStore } from '../../src/agent/approvals.ts';
import { createTurnMemory } from '../../src/agent/memory-context.ts';
import type { Config, RemoteToolsConfig, TranscriptionConfig } from '../../src/config/schema.ts';
import type { Logger } from '../../src/log.ts';
import { createImagePreparer } from '../../src/media/image.ts';
import type { Transcriber } from '../../src/media/transcribe.ts';
import { createWorkspaceImages } from '../../src/media/workspace-images.ts';
import type { Memory } from '../../src/memory.ts';
import { meterToolRunner, type SwitchboardMetrics } from '../../src/metrics.ts';
import type { Provider } from '../../src/provider.ts';
import { createMeteredProvider } from '../../src/providers/metered.ts';
import type { ScheduleStore } from '../../src/schedule/store.ts';
import type { ConfigDiff, Prepared } from '../reload.ts';
import { buildProvider } from './provider.ts';
import { buildTools, type BuiltTools, type ToolDeps } from './tools.ts';

export interface AgentDeps {
  readonly workspace: string;
  readonly log: Logger;
  readonly metrics: SwitchboardMetrics;
  readonly approvals: ApprovalStore;
  readonly schedules: ScheduleStore;
  readonly memory: Memory;
  /** The memory the turns recall from (the console's recording wrapper when it is on). */
  readonly recallFrom: Memory;
  readonly remoteTools?: RemoteToolsConfig | undefined;
  readonly peers?: ToolDeps['peers'];
  readonly maxFileBytes: (channel: string) => number | undefined;
  /** A rebuilt tool set replaced the old one: its endpoints move to it. */
  readonly onToolsReplaced?: (built: BuiltTools) => void;
}

export interface AgentParts {
  /** What a reload may replace. */
  readonly current: { provider: Provider; tools: BuiltTools; agent: TurnHandler };
  /** The model as the tools (the delegate tool) reach it: always the current endpoint. */
  readonly provider: Provider;
  /** Builds what the diff says changed; commit swaps it in for the next turn and closes what it replaced. */
  rebuild(from: Config, diff: ConfigDiff): Promise<Prepared>;
}

export async function buildAgent(config: Config, deps: AgentDeps): Promise<AgentParts> {
  const { workspace, log, metrics } = deps;
  // Photos to the model: read from the workspace, prepared with sharp — imported on the first photo, not here.
  const images = createWorkspaceImages({ workspace, preparer: createImagePreparer() });
  const buildEndpoint = async (from: Config): Promise<Provider> =>
    createMeteredProvider(await buildProvider(from, log, { images, maxImages: from.agent.max_images }), { meter: metrics, label: from.provider.kind });
  const provider: Provider = {
    get name() {
      return current.provider.name;
    },
    chat: (request, signal) => current.provider.chat(request, signal),
  };
  const toolsFor = (from: Config): Promise<BuiltTools> =>
    buildTools({
      maxFileBytes: deps.maxFileBytes,
      config: from,
      workspace,
      provider,
      approvals: deps.approvals,
      schedules: deps.schedules,
      memory: deps.memory,
      log,
      ...(deps.remoteTools ? { remoteTools: deps.remoteTools } : {}),
      ...(deps.peers ? { peers: deps.peers } : {}),
    });
  const agentFor = (from: Config, endpoint: Provider, built: BuiltTools): TurnHandler => {
    const handle = createAgent({
      ...(from.transcription ? { transcription: turnTranscription(from.transcription, workspace, log) } : {}),
      provider: endpoint,
      runner: meterToolRunner(built.runner, metrics),
      approvals: deps.approvals,
      name: from.agent.name,
      instructions: from.agent.instructions,
      workspace,
      maxToolIterations: from.agent.max_tool_iterations,
      toolCalling: from.provider.tool_calling,
      ...(from.memory.backend === 'none'
        ? {}
        : {
            memory: createTurnMemory({
              memory: deps.recallFrom,
              autoRecall: from.memory.auto_recall,
              limit: from.memory.recall_limit,
              minScore: from.memory.min_relevance,
              maxChars: from.memory.max_entry_chars,
              autoSave: from.memory.auto_save,
            }),
          }),
    });
    // The built-in tools load on first use (BuiltTools.load): the first turn waits for them.
    return async (input) => {
      await built.load();
      return handle(input);
    };
  };
  const current: AgentParts['current'] = { provider: await buildEndpoint(config), tools: undefined!, agent: undefined! };
  current.tools = await toolsFor(config);
  current.agent = agentFor(config, current.provider, current.tools);

  const rebuild = async (from: Config, diff: ConfigDiff): Promise<Prepared> => {
    const endpoint = diff.provider ? await buildEndpoint(from) : current.provider;
    const built = diff.tools ? await toolsFor(from) : current.tools;
    // A new tool set is loaded before it is committed, as the first one is before a turn.
    if (built !== current.tools) {
      try {
        await built.load();
      } catch (error) {
        // Its MCP servers and remote-tool endpoint started already: nothing will commit them.
        await built.close().catch(() => undefined);
        throw error;
      }
    }
    const agent = agentFor(from, endpoint, built);
    return {
      commit: async () => {
        const old = current.tools;
        Object.assign(current, { provider: endpoint, tools: built, agent });
        if (built !== old) {
          deps.onToolsReplaced?.(built);
          // Remote-tool clients of the old set are disconnected here and reconnect to the new one.
          await old.close().catch((error: unknown) => log.warn({ err: error }, 'closing the replaced tools failed'));
        }
      },
      discard: async () => {
        if (built !== current.tools) await built.close();
      },
    };
  };
  return { current, provider, rebuild };
}

/** Models `/model` may switch between: the main one first, then fallbacks and routes. */
export function configuredModels(config: Config): string[] {
  const models = [config.provider.model, ...config.provider.fallback_models, ...config.routes.map((route) => `hint:${route.hint}`)];
  return [...new Set(models)];
}

/**
 * `[transcription]` for the agent: src/media/transcribe.ts is imported on the first voice
 * note, not at start (a daemon without voice notes loads nothing for them).
 */
function turnTranscription(config: TranscriptionConfig, workspace: string, log: Logger): TurnTranscription {
  let made: Promise<Transcriber> | undefined;
  return {
    echo: config.echo_transcript,
    transcriber: () =>
      (made ??= import('../../src/media/transcribe.ts').then(({ createTranscriber }) =>
        createTranscriber({
          baseUrl: config.base_url,
          model: config.model,
          ...(config.api_key === undefined ? {} : { apiKey: config.api_key }),
          ...(config.language === undefined ? {} : { language: config.language }),
          timeoutMs: config.timeout_seconds * 1000,
          maxRetries: config.max_retries,
          maxRetryAfterMs: config.retry_max_wait_seconds * 1000,
          maxBytes: Math.round(config.max_audio_mb * 1024 * 1024),
          workspace,
          log: log.child({ component: 'transcription' }),
        }),
      )),
  };
}
