/**
 * Turns `[tools]`, `[security]` and `[agents.*]` into tool runners: the main agent's, and
 * one per sub-agent (built for its delegation depth). Each tool module is imported only when
 * that tool is enabled.
 */
import type { Logger } from 'pino';
import type { ApprovalStore } from '../../src/agent/approvals.ts';
import { createToolRunner, type ToolList, type ToolRunner } from '../../src/agent/tool-runner.ts';
import { createArgsValidator } from '../../src/agent/validate.ts';
import type { Config, RemoteToolsConfig, ToolName } from '../../src/config/schema.ts';
import type { Memory } from '../../src/memory.ts';
import type { Provider } from '../../src/provider.ts';
import type { ScheduleStore } from '../../src/schedule/store.ts';
import { decide } from '../../src/security/autonomy.ts';
import { createSecurityPolicy, type SecurityPolicy } from '../../src/security/policy.ts';
import { createRateLimiter } from '../../src/security/rate-limit.ts';
import type { SsrfGuard } from '../../src/security/ssrf.ts';
import type { Tool } from '../../src/tool.ts';
import { createClockTool } from '../../src/tools/clock.ts';
import type { SubAgentSpec } from '../../src/tools/delegate.ts';
import type { McpTools } from '../../src/tools/mcp.ts';
import type { RemoteTools } from '../../src/tools/remote.ts';
import type { RemoteToolPeers } from '../../src/tools/remote-peers.ts';
import { combineSources, staticSource, type ToolSource } from '../../src/tools/sources.ts';

export interface ToolDeps {
  readonly config: Config;
  readonly workspace: string;
  readonly provider: Provider;
  readonly approvals: ApprovalStore;
  readonly schedules: ScheduleStore;
  readonly memory?: Memory;
  readonly log: Logger;
  /** `[gateway.remote_tools]`, only when the gateway runs. */
  readonly remoteTools?: RemoteToolsConfig;
  /** The cluster's other nodes (cluster mode only): their clients' tools are offered too, and calls to them routed. */
  readonly peers?: RemoteToolPeers;
  /** The largest file a channel instance accepts (its FileSender's `maxFileBytes`), for send_file. */
  readonly maxFileBytes?: (channel: string) => number | undefined;
}

type Factory = (context: { policy: SecurityPolicy; guard: () => Promise<SsrfGuard>; deps: ToolDeps }) => Promise<Tool[]>;

const asTools = (...tools: Array<Tool<never>>): Tool[] => tools as unknown as Tool[];

/** One entry per built-in (except delegate, which needs the others). */
const factories: Record<Exclude<ToolName, 'delegate'>, Factory> = {
  current_time: async () => asTools(createClockTool()),
  shell: async ({ policy }) => asTools((await import('../../src/tools/shell.ts')).createShellTool(policy)),
  send_file: async ({ policy, deps }) =>
    asTools((await import('../../src/tools/send-file.ts')).createSendFileTool(policy, deps.maxFileBytes ? { maxFileBytes: deps.maxFileBytes } : {})),
  file_read: async ({ policy }) => asTools((await import('../../src/tools/files.ts')).createFileReadTool(policy)),
  file_write: async ({ policy }) => asTools((await import('../../src/tools/files.ts')).createFileWriteTool(policy)),
  file_edit: async ({ policy }) => asTools((await import('../../src/tools/files.ts')).createFileEditTool(policy)),
  glob: async ({ policy }) => asTools((await import('../../src/tools/search.ts')).createGlobTool(policy)),
  grep: async ({ policy }) => asTools((await import('../../src/tools/search.ts')).createGrepTool(policy)),
  http_request: async ({ guard }) => asTools((await import('../../src/tools/http.ts')).createHttpRequestTool({ guard: await guard() })),
  web_fetch: async ({ guard }) => asTools((await import('../../src/tools/http.ts')).createWebFetchTool({ guard: await guard() })),
  schedule: async ({ deps }) => asTools((await import('../../src/tools/schedule.ts')).createScheduleTool({ store: deps.schedules })),
  memory_store: async ({ deps }) => memoryTool(deps, 'memory_store'),
  memory_recall: async ({ deps }) => memoryTool(deps, 'memory_recall'),
  memory_forget: async ({ deps }) => memoryTool(deps, 'memory_forget'),
};

/** The memory tools exist only when a memory backend is on. */
async function memoryTool(deps: ToolDeps, name: string): Promise<Tool[]> {
  if (!deps.memory || deps.config.memory.backend === 'none') return [];
  const { createMemoryTools } = await import('../../src/tools/memory.ts');
  return createMemoryTools(deps.memory, { maxChars: deps.config.memory.max_entry_chars }).filter((tool) => tool.name === name);
}

export interface BuiltTools {
  readonly runner: ToolRunner;
  readonly policy: SecurityPolicy;
  /** Every tool the main agent is offered, with its source (GET /api/tools). */
  readonly sources: ToolSource;
  readonly mcp?: McpTools;
  readonly remote?: RemoteTools;
  /**
   * Imports and builds the built-in tools (once; a failed load is tried again at the next
   * call). Until it has, the list offers none: a turn, /api/tools, a remote-tool client and a
   * reload await it — on first use, so a daemon is ready, and idles, without the tools' ~15 modules.
   */
  load(): Promise<void>;
  /** Disconnects remote clients and stops MCP servers. */
  close(): Promise<void>;
}

export async function buildTools(deps: ToolDeps): Promise<BuiltTools> {
  const { config } = deps;
  const security = config.security;
  const policy = createSecurityPolicy({
    workspace: deps.workspace,
    autonomy: security.autonomy,
    ...(security.allowed_commands === undefined ? {} : { allowedCommands: security.allowed_commands }),
    extraAllowedCommands: security.extra_allowed_commands,
    envPassthrough: security.env_passthrough,
    commandTimeoutMs: security.command_timeout_seconds * 1000,
    maxOutputBytes: security.max_output_kb * 1024,
    maxWriteBytes: security.max_write_mb * 1024 * 1024,
  });
  let guard: Promise<SsrfGuard> | undefined;
  const context = {
    policy,
    deps,
    guard: () => (guard ??= import('../../src/security/ssrf.ts').then(({ createSsrfGuard }) => createSsrfGuard({ allowHosts: security.allow_hosts }))),
  };
  const validator = createArgsValidator({ log: deps.log.child({ component: 'tool-args' }) });
  const limiter = createRateLimiter({ limit: security.max_tool_calls_per_hour, windowMs: 3_600_000, maxKeys: security.rate_limit_senders });
  const built = new Map<ToolName, Promise<Tool[]>>();
  // The factories run side by side: each imports its own module, and one import after another
  // kept the loader waiting on each file in turn before ready (the default set is ~15 modules).
  // Promise.all keeps the configured order and attaches a handler to every factory's promise.
  const toolsNamed = async (names: readonly ToolName[]): Promise<Tool[]> => {
    const made = names.flatMap((name) => {
      if (name === 'delegate') return [];
      if (!built.has(name)) built.set(name, factories[name](context));
      return [built.get(name)!];
    });
    return (await Promise.all(made)).flat();
  };
  const runnerFor = (tools: readonly Tool[] | ToolList): ToolRunner =>
    createToolRunner({
      tools,
      validator,
      decide: (assessment) => decide(security.autonomy, assessment),
      alwaysApproved: (ctx, summary) => deps.approvals.isAlways(ctx.channel, ctx.senderId, summary),
      rateLimit: (key) => limiter.take(key),
      timeoutMs: config.agent.tool_timeout_seconds * 1000,
    });

  /** The tools for an agent at `depth` (0 = main): delegate only while depth < max_delegate_depth. */
  const toolsAt = async (names: readonly ToolName[], depth: number): Promise<Tool[]> => {
    const tools = await toolsNamed(names);
    const agents = Object.entries(config.agents);
    if (names.includes('delegate') && agents.length > 0 && depth < config.agent.max_delegate_depth) {
      const specs = new Map<string, SubAgentSpec>();
      for (const [name, agent] of agents) {
        specs.set(name, {
          description: agent.description,
          instructions: agent.instructions,
          ...(agent.model === undefined ? {} : { model: agent.model }),
          runner: runnerFor(await toolsAt(agent.tools, depth + 1)),
          maxToolIterations: agent.max_tool_iterations,
          timeoutMs: agent.timeout_seconds * 1000,
        });
      }
      const { createDelegateTool } = await import('../../src/tools/delegate.ts');
      tools.push(createDelegateTool({ provider: deps.provider, agents: specs, xml: config.provider.tool_calling === 'xml' }) as unknown as Tool);
    }
    return tools;
  };

  // Built-ins first: on a name clash the earlier source wins. Sub-agents keep built-ins only.
  // None until load() has built them; then the fixed list it built, which builtInSource delegates to.
  let builtIn = staticSource([]);
  let loading: Promise<void> | undefined;
  const load = (): Promise<void> =>
    (loading ??= toolsAt(config.tools.enabled, 0).then(
      (tools) => {
        builtIn = staticSource(tools);
      },
      (error: unknown) => {
        loading = undefined;
        throw error;
      },
    ));
  const builtInSource: ToolSource = { tools: () => builtIn.tools(), origin: (tool) => builtIn.origin(tool) };
  const extra: ToolSource[] = [];
  let mcp: McpTools | undefined;
  if (config.mcp.servers.length > 0) {
    const { createMcpTools } = await import('../../src/tools/mcp.ts');
    mcp = createMcpTools({
      log: deps.log,
      servers: config.mcp.servers.map((s) => ({
        name: s.name,
        timeoutMs: s.timeout_seconds * 1000,
        ...(s.command === undefined ? {} : { command: s.command, args: s.args, env: s.env }),
        ...(s.cwd === undefined ? {} : { cwd: s.cwd }),
        ...(s.url === undefined ? {} : { url: s.url, headers: s.headers }),
      })),
    });
    await mcp.start();
    extra.push(mcp);
  }
  let remote: RemoteTools | undefined;
  if (deps.remoteTools) {
    const { createRemoteTools } = await import('../../src/tools/remote.ts');
    const mcpTools = mcp;
    remote = createRemoteTools({
      log: deps.log,
      callTimeoutMs: deps.remoteTools.call_timeout_seconds * 1000,
      maxToolsPerClient: deps.remoteTools.max_tools_per_client,
      maxClients: deps.remoteTools.max_clients,
      ...(deps.remoteTools.allow === undefined ? {} : { allow: deps.remoteTools.allow }),
      reserved: () => [...builtIn.tools().map((t) => t.name), ...(mcpTools?.tools().map((t) => t.name) ?? [])],
      ...(deps.peers ? { peers: deps.peers } : {}),
    });
    extra.push(remote);
  }
  if (deps.peers) {
    // After the local ones: a local client's tool wins a name clash.
    const { createPeerTools } = await import('../../src/tools/remote-peers.ts');
    extra.push(createPeerTools(deps.peers, { callTimeoutMs: (deps.remoteTools?.call_timeout_seconds ?? 30) * 1000 }));
  }
  const sources = combineSources([builtInSource, ...extra]);
  return {
    runner: runnerFor(sources),
    policy,
    sources,
    load,
    ...(mcp ? { mcp } : {}),
    ...(remote ? { remote } : {}),
    close: async () => {
      await remote?.close();
      await mcp?.close();
    },
  };
}
