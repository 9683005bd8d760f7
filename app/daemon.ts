/**
 * The composition root: config becomes objects here and nowhere else. Each channel's
 * module is imported only when that channel is configured.
 */
import { existsSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { canSendFiles, type Channel, type ChannelContext } from '../src/channel.ts';
import type { Memory } from '../src/memory.ts';
import { createAgent, type TurnHandler, type TurnTranscription } from '../src/agent/agent.ts';
import type { Provider } from '../src/provider.ts';
import { packageVersion } from '../src/version.ts';
import { ApprovalStore } from '../src/agent/approvals.ts';
import { createTurnMemory } from '../src/agent/memory-context.ts';
import { ConfigError, loadConfig, locateConfig } from '../src/config/load.ts';
import { tuneHeap } from './heap.ts';
import type { ChannelPolicyConfig, Config, TranscriptionConfig } from '../src/config/schema.ts';
import type { Transcriber } from '../src/media/transcribe.ts';
import { createLogger, createLogTail, type Logger } from '../src/log.ts';
import { defaultDeliveryOptions } from '../src/runtime/delivery.ts';
import { Runtime, type ChannelPolicy, type RuntimeOptions } from '../src/runtime/runtime.ts';
import { ConversationSettings } from '../src/store/settings.ts';
import { defaultSupervisorOptions } from '../src/runtime/supervisor.ts';
import { Scheduler } from '../src/schedule/scheduler.ts';
import { ScheduleStore } from '../src/schedule/store.ts';
import { PairingStore } from '../src/policy/access.ts';
import { openDatabase, type Db } from '../src/store/db.ts';
import { sqliteDatabase } from '../src/store/sqlite-sql.ts';
import { channelState } from '../src/store/channel-state.ts';
import type { Database } from '../src/store/sql.ts';
import { lockDataDir } from '../src/store/lock.ts';
import { explainIn, makeDirectory, withFileContext } from '../src/store/files.ts';
import { StorageHealth } from '../src/store/storage.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { sendJson } from '../src/http/json.ts';
import type { GatewayRoutes } from '../src/route.ts';
import { createSwitchboardMetrics, meterToolRunner } from '../src/metrics.ts';
import { createMeteredProvider } from '../src/providers/metered.ts';
import { createToolsRoute } from '../src/tools/sources.ts';
import { buildMemory } from './compose/memory.ts';
import { buildProvider } from './compose/provider.ts';
import { createImagePreparer } from '../src/media/image.ts';
import { createWorkspaceImages } from '../src/media/workspace-images.ts';
import { buildTools, type BuiltTools } from './compose/tools.ts';
import { localTurns } from './compose/turns.ts';
import { announceReady } from './ready.ts';
import { configPort, consoleStaticDir, lazyConsole, nodeName, recordRecalls } from './console.ts';
import { createReloader, createRouteTable, type ConfigDiff, type Prepared, type RouteTable } from './reload.ts';

/** `chat` exits with this (EX_TEMPFAIL: try again later) when a message could not be answered. */
export const EXIT_UNANSWERED = 75;

export interface DaemonOptions {
  readonly mode: 'start' | 'chat';
  readonly configFlag?: string;
  /** `--verbose`: `chat` logs from info (instead of errors only), `start` from debug. */
  readonly verbose?: boolean;
}

/** What a channel factory gets besides its own config section. */
interface ChannelDeps {
  readonly config: Config;
  readonly mode: 'start' | 'chat';
  readonly log: Logger;
  /** Ends a `chat` session once its input has ended and every reply is out; returns what to tell the person. */
  readonly finish: () => string | undefined;
  /** Ctrl-C at the terminal's prompt: the same as SIGINT; returns what to tell the person. */
  readonly interrupt: () => string | undefined;
  /** What every chat channel gets (see ChannelContext). */
  readonly context: ChannelContext;
}

/** One entry per channel kind; the import runs only when the channel is configured. */
const channelFactories: Record<keyof Config['channels'], (deps: ChannelDeps) => Promise<Channel>> = {
  terminal: async ({ config, mode, finish, interrupt }) => {
    const { createTerminalChannel } = await import('../channels/terminal/index.ts');
    return createTerminalChannel({
      input: process.stdin,
      output: process.stdout,
      user: config.channels.terminal?.user ?? safeUsername(),
      assistantName: config.agent.name,
      interactive: process.stdin.isTTY === true,
      banner: `Talking to ${config.agent.name} (${config.provider.model}) · /help lists the commands · Ctrl-D or Ctrl-C quits`,
      onInterrupt: interrupt,
      ...(mode === 'chat' ? { onEnd: finish } : {}),
    });
  },
  telegram: async ({ config, context }) => {
    const { createTelegramChannel } = await import('../channels/telegram/index.ts');
    return createTelegramChannel(config.channels.telegram!, context);
  },
  discord: async ({ config, context }) => {
    const { createDiscordChannel } = await import('../channels/discord/index.ts');
    return createDiscordChannel(config.channels.discord!, context);
  },
  slack: async ({ config, context }) => {
    const { createSlackChannel } = await import('../channels/slack/index.ts');
    return createSlackChannel(config.channels.slack!, context);
  },
  matrix: async ({ config, context }) => {
    const { createMatrixChannel } = await import('../channels/matrix/index.ts');
    return createMatrixChannel(config.channels.matrix!, context);
  },
  irc: async ({ config, context }) => {
    const { createIrcChannel } = await import('../channels/irc/index.ts');
    return createIrcChannel(config.channels.irc!, context);
  },
  email: async ({ config, context }) => {
    const { createEmailChannel } = await import('../channels/email/index.ts');
    return createEmailChannel(config.channels.email!, context);
  },
  webhook: async ({ config, context }) => {
    const { createWebhookChannel } = await import('../channels/webhook/index.ts');
    return createWebhookChannel(config.channels.webhook!, context);
  },
};

/** Runs `start` or `chat` until it is told to stop; returns the exit code. Throws ConfigError. */
export async function runDaemon(options: DaemonOptions): Promise<number> {
  const startedAt = performance.now();
  const file = locateConfig(options.configFlag === undefined ? {} : { flag: options.configFlag });
  // chat opens no gateway, no channel but the terminal and no PostgreSQL: their secrets
  // (a gateway token, a bot token, the database URL) need not be set for it.
  const { config } = loadConfig(file, process.env, { requireSecrets: options.mode === 'chat' ? chatNeedsSecret : true });
  const clustered = options.mode === 'start' && config.store.kind === 'postgres';
  tuneHeap(config.runtime.heap);
  // Refuse an exposed gateway before anything opens (exit 78).
  const gatewayConfig = options.mode === 'start' ? config.gateway : undefined;
  // The gateway module (and node:http, ~40 ms) is loaded only when [gateway] is configured.
  const gatewayModule = gatewayConfig ? await import('../src/gateway/server.ts') : undefined;
  if (gatewayConfig) gatewayModule!.validateGatewayConfig(gatewayConfig, file);

  const names = channelNames(config, options.mode);
  // The web console (served by the gateway, loaded on its first request) keeps the last log
  // lines for its live tail, and adds the browser chat as the `web` channel: a channel that
  // counts, so a daemon with only the console on starts (and is reached from the browser).
  const consoleOn = gatewayConfig !== undefined && gatewayConfig.console;
  if (names.length === 0 && !consoleOn) throw noChannelError(file, config);
  const logTail = consoleOn ? createLogTail() : undefined;
  // With the terminal in use, stdout is the conversation: logs go to stderr.
  const log = createLogger({
    ...(logTail ? { tap: logTail } : {}),
    level: options.mode === 'chat' ? logLevel(config, 'error', options.verbose ? 'info' : undefined) : logLevel(config, 'info', options.verbose ? 'debug' : undefined),
    format: config.log.format,
    stream: names.includes('terminal') ? process.stderr : process.stdout,
    // Beside a conversation, one line per event.
    singleLine: names.includes('terminal'),
  });

  const dataDir = resolve(dirname(file), config.data_dir);
  const dbPath = join(dataDir, 'switchboard.db');
  const files = { dataDir, configFile: file };
  // Everything start creates in the data_dir, up front (0700): a file-system problem is one
  // paragraph naming the path, the user and the fix (FileSystemError, exit 73), never a crash.
  const { lock, db, freshDatabase } = withFileContext(files, () => {
    for (const dir of [dataDir, join(dataDir, 'workspace'), join(dataDir, 'channels'), ...names.map((name) => join(dataDir, 'channels', name))]) makeDirectory(dir);
    const held = lockDataDir(dataDir);
    const fresh = !existsSync(dbPath);
    try {
      return { lock: held, freshDatabase: fresh, db: openDatabase(dbPath, { durability: config.runtime.durability }) };
    } catch (error) {
      held.release();
      throw error;
    }
  });

  const workspace = realpathSync(join(dataDir, 'workspace'));
  // A full disk is reported here by the inbox, the turns and the channels' own files.
  const storage = new StorageHealth({ dataDir, log: log.child({ component: 'storage' }) });
  // Read only when scraped, so the closure over the runtime built below is fine.
  const metrics = createSwitchboardMetrics({ channels: names, health: () => runtime.health(), eventLoopLag: gatewayConfig !== undefined });
  const maxInFlight = config.runtime.max_in_flight > 0 ? config.runtime.max_in_flight : Math.min(64, Math.max(8, names.length * 4));
  let cluster: Awaited<ReturnType<typeof import('./compose/cluster.ts')['openCluster']>> | undefined;
  if (clustered) {
    try {
      cluster = await (await import('./compose/cluster.ts')).openCluster(config, log, maxInFlight);
    } catch (error) {
      db.close();
      lock.release();
      throw error;
    }
  }
  const database = cluster?.database ?? sqliteDatabase(db);
  const approvals = new ApprovalStore(database);
  const schedules = new ScheduleStore(database);
  const memory = await buildMemory({ config, db, dbPath, dataDir, freshDatabase, log, ...(cluster ? { shared: cluster.database } : {}) });
  // Recall is remembered per turn for the console's transcripts (only when it is on).
  const recalled = consoleOn ? recordRecalls(memory.memory) : undefined;
  // Photos to the model: read from the workspace, prepared with sharp — imported on the first photo, not here.
  const images = createWorkspaceImages({ workspace, preparer: createImagePreparer() });
  const buildEndpoint = async (from: Config): Promise<Provider> =>
    createMeteredProvider(await buildProvider(from, log, { images, maxImages: from.agent.max_images }), { meter: metrics, label: from.provider.kind });
  // The tools (the delegate tool) reach the model through this, so a reload that only
  // changes the provider does not rebuild the tools (and drop remote-tool clients).
  const provider: Provider = {
    get name() {
      return parts.provider.name;
    },
    chat: (request, signal) => parts.provider.chat(request, signal),
  };
  /** The channels built so far by name (a reload's too), for what the tools ask of a turn's channel. */
  const builtChannels = new Map<string, Channel>();
  const maxFileBytes = (name: string): number | undefined => {
    const channel = builtChannels.get(name);
    return channel && canSendFiles(channel) ? channel.maxFileBytes : undefined;
  };
  const toolsFor = (from: Config): Promise<BuiltTools> =>
    buildTools({
      maxFileBytes,
      config: from,
      workspace,
      provider,
      approvals,
      schedules,
      memory: memory.memory,
      log,
      ...(gatewayConfig?.remote_tools ? { remoteTools: gatewayConfig.remote_tools } : {}),
      ...(cluster ? { peers: cluster.remoteTools } : {}),
    });
  const agentFor = (from: Config, endpoint: Provider, built: BuiltTools): TurnHandler =>
    createAgent({
      ...(from.transcription ? { transcription: turnTranscription(from.transcription, workspace, log) } : {}),
      provider: endpoint,
      runner: meterToolRunner(built.runner, metrics),
      approvals,
      name: from.agent.name,
      instructions: from.agent.instructions,
      workspace,
      maxToolIterations: from.agent.max_tool_iterations,
      toolCalling: from.provider.tool_calling,
      ...(from.memory.backend === 'none'
        ? {}
        : {
            memory: createTurnMemory({
              memory: recalled?.memory ?? memory.memory,
              autoRecall: from.memory.auto_recall,
              limit: from.memory.recall_limit,
              minScore: from.memory.min_relevance,
              maxChars: from.memory.max_entry_chars,
              autoSave: from.memory.auto_save,
            }),
          }),
    });
  /** What a reload may replace; a turn reads `parts.agent` when it starts. */
  const parts: { provider: Provider; tools: BuiltTools; agent: TurnHandler } = { provider: await buildEndpoint(config), tools: undefined!, agent: undefined! };
  parts.tools = await toolsFor(config);
  parts.agent = agentFor(config, parts.provider, parts.tools);

  let finish = (): string | undefined => undefined;
  let interrupt = (): string | undefined => undefined;
  // Built before the channels (a channel may serve an endpoint on it), started once all are.
  // One token check for the gateway's routes and the console's sign-in: one limit for every way in.
  const tokenGuard = gatewayConfig
    ? gatewayModule!.createTokenGuard({
        token: () => (gatewayConfig.token === undefined || gatewayConfig.token === '' ? undefined : gatewayConfig.token),
        log: log.child({ component: 'gateway' }),
        trustedProxies: gatewayConfig.trusted_proxies,
      })
    : undefined;
  const version = packageVersion();
  const gateway = gatewayConfig
    ? gatewayModule!.createGateway({
        listen: gatewayConfig.listen,
        ...(gatewayConfig.token === undefined ? {} : { token: gatewayConfig.token }),
        ...(tokenGuard ? { tokenGuard } : {}),
        log: log.child({ component: 'gateway' }),
        health: () => runtime.health(),
        ...(cluster ? { cluster: () => cluster!.status() } : {}),
        metrics: () => metrics.render(),
        // `switchboard status` prints it on its first line.
        ...(version === undefined ? {} : { version }),
        maxBodyBytes: gatewayConfig.max_body_kb * 1024,
        maxConnections: gatewayConfig.max_connections,
      })
    : undefined;
  const routes: RouteTable | undefined = gateway ? createRouteTable(gateway) : undefined;
  /** The tools' endpoints (/ws/tools, /api/tools), which move to a rebuilt tool set. */
  const stageToolRoutes = (built: BuiltTools): { commit(): void } | undefined => {
    const staged = routes?.stage('tools');
    if (built.remote) staged?.routes.addUpgrade(built.remote.route);
    staged?.routes.addRoute(createToolsRoute(built.sources));
    return staged;
  };
  const attachments = createAttachmentStore({ workspace, maxBytes: config.runtime.max_attachment_mb * 1024 * 1024 });
  const buildChannel = (name: keyof Config['channels'], from: Config, channelRoutes: GatewayRoutes | undefined): Promise<Channel> => {
    const channelLog = log.child({ channel: name });
    const stateDir = join(dataDir, 'channels', name);
    makeDirectory(stateDir);
    const context: ChannelContext = {
      name,
      log: channelLog,
      assistantName: from.agent.name,
      attachments,
      state: channelState(database, name),
      stateDir,
      storage,
      ...(channelRoutes ? { gateway: channelRoutes } : {}),
    };
    return channelFactories[name]({ config: from, mode: options.mode, log: channelLog, finish: () => finish(), interrupt: () => interrupt(), context }).then((channel) => {
      builtChannels.set(name, channel);
      return channel;
    });
  };
  const channels = await Promise.all(
    names.map(async (name) => {
      const staged = routes?.stage(name);
      const channel = await buildChannel(name, config, staged?.routes);
      staged?.commit();
      return channel;
    }),
  );
  const webChannel = consoleOn ? await buildWebChannel() : undefined;
  if (webChannel) channels.push(webChannel);
  async function buildWebChannel() {
    const { createWebChannel } = await import('../channels/web/index.ts');
    const stateDir = join(dataDir, 'channels', 'web');
    makeDirectory(stateDir);
    const name = webChannelName(cluster?.node);
    return createWebChannel({ name, log: log.child({ channel: name }), assistantName: config.agent.name, attachments, state: channelState(database, name), stateDir, storage });
  }
  const pairing = new PairingStore(database);
  const settings = new ConversationSettings(database);
  const runtime = new Runtime({
    database,
    log,
    // cluster mode: each channel is added when this node takes its lease
    channels: cluster ? [] : channels,
    agent: (input) => parts.agent(input),
    maxInFlight,
    maxQueued: config.runtime.max_queued,
    shutdownGraceMs: config.runtime.shutdown_grace_seconds * 1000,
    supervisor: {
      ...defaultSupervisorOptions,
      initialBackoffMs: config.runtime.restart_initial_seconds * 1000,
      maxBackoffMs: config.runtime.restart_max_seconds * 1000,
      healthyAfterMs: config.runtime.restart_reset_seconds * 1000,
    },
    delivery: defaultDeliveryOptions,
    events: metrics.runtimeEvents,
    pairing,
    storage,
    ...(cluster?.turns ?? localTurns(maxInFlight, config.runtime.max_queued)),
    ...turnSettings(config),
  });
  function turnSettings(from: Config): { policies: Map<string, ChannelPolicy>; commands: NonNullable<RuntimeOptions['commands']>; historyTurns: number; turnTimeoutMs: number } {
    return {
      policies: channelPolicies(from, channelNames(from, options.mode), webChannel?.name),
      commands: {
        models: configuredModels(from),
        model: (conversation) => settings.model(conversation),
        setModel: (tx, conversation, model) => settings.in(tx).setModel(conversation, model),
      },
      historyTurns: from.agent.history_turns,
      turnTimeoutMs: from.agent.turn_timeout_seconds * 1000,
    };
  }

  /** Builds what the diff says changed; commit swaps it in for the next turn and closes what it replaced. */
  const rebuildAgent = async (from: Config, diff: ConfigDiff): Promise<Prepared> => {
    const endpoint = diff.provider ? await buildEndpoint(from) : parts.provider;
    const built = diff.tools ? await toolsFor(from) : parts.tools;
    const agent = agentFor(from, endpoint, built);
    return {
      commit: async () => {
        const old = parts.tools;
        Object.assign(parts, { provider: endpoint, tools: built, agent });
        if (built !== old) {
          stageToolRoutes(built)?.commit();
          // Remote-tool clients of the old set are disconnected here and reconnect to the new one.
          await old.close().catch((error: unknown) => log.warn({ err: error }, 'closing the replaced tools failed'));
        }
      },
      discard: async () => {
        if (built !== parts.tools) await built.close();
      },
    };
  };
  const reloader =
    options.mode === 'start'
      ? createReloader({
          initial: config,
          load: () => loadConfig(file).config,
          log,
          // in a cluster a channel runs where its lease is held
          runtime: cluster ? cluster.reloadable(runtime) : runtime,
          buildChannel,
          rebuildAgent,
          applySettings: (from) => runtime.reconfigure(turnSettings(from)),
          ...(routes ? { routes } : {}),
        })
      : undefined;

  const scheduler = new Scheduler({ store: schedules, push: runtime.push, log: log.child({ component: 'scheduler' }) });

  // Channels may hold nothing open (the terminal after its input ended, say): the daemon
  // itself stays up until it is told to stop.
  if (gateway) {
    stageToolRoutes(parts.tools)?.commit();
    if (reloader) {
      const staged = routes!.stage('reload');
      staged.routes.addRoute({
        method: 'POST',
        path: '/api/reload',
        auth: 'token',
        handle: async (_request, response) => {
          const result = await reloader.reload();
          sendJson(response, result.ok ? 200 : 422, result);
        },
      });
      staged.commit();
    }
  }
  if (gateway && consoleOn) {
    gateway.setFallback(
      lazyConsole(async () => {
        const { createConsoleQueries } = await import('../src/console/queries.ts');
        const { statusReport } = gatewayModule!;
        const { listTools } = await import('../src/tools/sources.ts');
        const current = (): Config => reloader?.current() ?? config;
        return {
          log: log.child({ component: 'console' }),
          token: () => (gatewayConfig!.token === undefined || gatewayConfig!.token === '' ? undefined : gatewayConfig!.token),
          sessionMs: gatewayConfig!.session_hours * 3_600_000,
          trustedProxies: gatewayConfig!.trusted_proxies,
          ...(tokenGuard ? { tokenGuard } : {}),
          staticDir: consoleStaticDir(),
          maxJsonBytes: Math.min(64 * 1024, gatewayConfig!.max_body_kb * 1024),
          // Awaited: the runtime's reads may become asynchronous (the PostgreSQL backend).
          overview: async () => ({
            status: statusReport(runtime.health(), Math.round(Date.now() - process.uptime() * 1000), process.uptime() * 1000, version, cluster?.status()),
            model: current().provider.model,
            node: cluster?.node ?? nodeName(),
            activity: metrics.activity.minutes(),
          }),
          restartChannel: (name) => runtime.restartChannel(name),
          queries: createConsoleQueries(database),
          pairing,
          approvals,
          allowLists: () => Object.fromEntries(channelNames(current(), 'start').filter((name) => name !== 'terminal').map((name) => [name, (current().channels[name] as ChannelPolicyConfig | undefined)?.allow])),
          memory: memory.memory,
          tools: () => listTools(parts.tools.sources).tools.map(({ name, description, source }) => ({ name, description, source })),
          remoteClients: () => parts.tools.remote?.clients().map((client) => client.id) ?? [],
          toolCalls: () => metrics.activity.toolCalls(),
          ...(logTail ? { logs: logTail } : {}),
          ...(reloader ? { config: configPort({ file, current, reload: () => reloader.reload() }) } : {}),
          ...(webChannel ? { chat: webChannel } : {}),
          ...(recalled ? { recalls: recalled.recalls } : {}),
        };
      }),
    );
  }
  /** Closes what start opened, when it cannot go on. */
  const abandon = async (): Promise<void> => {
    await parts.tools.close();
    metrics.close();
    await memory.close();
    await cluster?.leave();
    db.close();
    lock.release();
  };
  if (gateway) {
    try {
      await gateway.start();
    } catch (error) {
      log.fatal({ err: error, listen: gatewayConfig!.listen }, 'the gateway could not listen (port in use? change [gateway] listen)');
      await abandon();
      return 1;
    }
  }

  // `switchboard reload` finds the daemon by this file (removed at stop; one left by a crash
  // is overwritten by the next start, and the CLI checks the pid is a switchboard first).
  const pidFile = options.mode === 'start' ? join(dataDir, 'switchboard.pid') : undefined;
  try {
    if (pidFile) writeFileSync(pidFile, `${process.pid}\n`);
  } catch (error) {
    await gateway?.stop(0);
    await abandon();
    throw explainIn(error, files, `write the pid file ${pidFile}`);
  }
  const keepAlive = setInterval(() => undefined, 1 << 30);
  const announcing = new AbortController();
  const stopped = new Promise<number>((resolveExit) => {
    let stopping = false;
    const stop = (reason: string, code: number): void => {
      if (stopping) return;
      stopping = true;
      announcing.abort();
      log.info({ reason }, 'stopping');
      void scheduler
        .stop()
        .then(() => runtime.stop())
        .then(() => cluster?.leave())
        .then(() => parts.tools.close())
        .then(() => gateway?.stop(1000))
        .then(() => memory.close())
        .catch((error: unknown) => log.error({ err: error }, 'error while stopping'))
        .finally(() => {
          clearInterval(keepAlive);
          if (pidFile) rmSync(pidFile, { force: true });
          // `chat` tells a script whether every message got an answer.
          const unanswered = options.mode === 'chat' && runtime.health().counters.failed > 0;
          metrics.close();
          db.close();
          lock.release();
          resolveExit(code === 0 && unanswered ? EXIT_UNANSWERED : code);
        });
    };
    /** The first SIGINT/SIGTERM (or Ctrl-C at the prompt) stops gracefully, the second at once; returns what to tell a person. */
    const onStop = (signal: NodeJS.Signals): string | undefined => {
      if (stopping) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(130);
      }
      const { inFlight } = runtime.health();
      stop(signal, 0);
      if (inFlight === 0) return undefined;
      return `stopping: finishing ${inFlight === 1 ? 'the reply' : `the ${inFlight} replies`} in progress — Ctrl-C again to quit now`;
    };
    const onSignal = (signal: NodeJS.Signals): void => {
      const note = onStop(signal);
      // The log may not show (chat logs errors only): a person at a terminal is told directly.
      if (note !== undefined && process.stderr.isTTY) process.stderr.write(`\n${note}\n`);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    // SIGHUP = reload the config (`switchboard reload`); `chat` keeps the default (hang up).
    if (reloader) process.on('SIGHUP', () => void (stopping ? undefined : reloader.reload()));
    interrupt = () => onStop('SIGINT');
    finish = () => {
      const { inFlight, queued } = runtime.health();
      void runtime.idle().then(() => stop('input ended', 0));
      const waiting = inFlight + queued;
      if (waiting === 0) return undefined;
      return `waiting for ${waiting === 1 ? 'the reply' : `${waiting} replies`} still to come — Ctrl-C to stop now`;
    };
  });

  await runtime.start();
  await cluster?.join(runtime, channels);
  scheduler.start();
  // Logged also while a channel keeps failing, naming it (app/ready.ts).
  announceReady({
    runtime,
    log,
    signal: announcing.signal,
    fields: () => ({ channels: webChannel ? [...names, webChannel.name] : names, maxInFlight, provider: provider.name, startupMs: Math.round(performance.now() - startedAt), config: file }),
  });
  return stopped;
}

/**
 * The browser chat's channel name. A browser talks to the node whose console it opened, so in a
 * cluster each node's chat is a channel of its own, `web-<node>`: only that node configures it,
 * so it always holds its lease, and a reply from a turn that ran on any node is sent by it to
 * the pages open there. (An operator's chat on another node is another conversation.)
 */
export function webChannelName(node: string | undefined): string {
  return node === undefined ? 'web' : `web-${node.replace(/[^A-Za-z0-9_.-]/g, '-')}`;
}

/** The conversation policy of each configured chat channel (the terminal has none: it is exempt from access rules; chat commands work there too). */
function channelPolicies(config: Config, names: ReadonlyArray<keyof Config['channels']>, web?: string): Map<string, ChannelPolicy> {
  const policies = new Map<string, ChannelPolicy>();
  // The browser chat: only signed-in operators can post, so everyone who reaches it is allowed; replies stream.
  if (web !== undefined) policies.set(web, { allow: ['*'], mentionOnly: false, stream: true });
  for (const name of names) {
    if (name === 'terminal') continue;
    const section = config.channels[name] as ChannelPolicyConfig | undefined;
    if (!section) continue;
    policies.set(name, { ...(section.allow ? { allow: section.allow } : {}), mentionOnly: section.mention_only ?? true, stream: section.stream ?? false });
  }
  return policies;
}

/** Models `/model` may switch between: the main one first, then fallbacks and routes. */
function configuredModels(config: Config): string[] {
  const models = [config.provider.model, ...config.provider.fallback_models, ...config.routes.map((route) => `hint:${route.hint}`)];
  return [...new Set(models)];
}

/**
 * `start` with nothing that could reach the agent: neither a channel table nor the browser chat
 * (the console of `[gateway]`). Names both ways in, and how this file has the console off.
 */
function noChannelError(file: string, config: Config): ConfigError {
  const web =
    config.gateway === undefined
      ? 'or turn on the browser chat: add a `[gateway]` table with `listen = "127.0.0.1:8787"` (its `console = true` is the default) and open http://127.0.0.1:8787/'
      : `or turn on the browser chat: set \`[gateway] console = true\` (it is false here) and open http://${config.gateway.listen}/`;
  return new ConfigError(file, [
    {
      path: 'channels',
      problem:
        'no channel is enabled, so nothing could reach the agent: uncomment the table of the one you want in this file (telegram, discord, slack, matrix, irc, email, webhook; terminal for a chat in this terminal) and give it its token, ' +
        `${web}. To talk to the agent here first, run \`switchboard chat\` (npm run chat): it needs no channel`,
      example: config.gateway === undefined ? '[gateway] listen = "127.0.0.1:8787"' : '[gateway] console = true',
    },
  ]);
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
      (made ??= import('../src/media/transcribe.ts').then(({ createTranscriber }) =>
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

/** Whether `chat` needs the secret at this config key: not for what only `start` opens (the gateway, other channels, the cluster's store). */
export function chatNeedsSecret(path: readonly string[]): boolean {
  const [table, name] = path;
  if (table === 'gateway' || table === 'store' || table === 'cluster') return false;
  return table !== 'channels' || name === 'terminal';
}

function channelNames(config: Config, mode: 'start' | 'chat'): Array<keyof Config['channels']> {
  if (mode === 'chat') return ['terminal']; // `chat` always talks through the terminal, and only there
  return (Object.keys(channelFactories) as Array<keyof Config['channels']>).filter((name) => config.channels[name] !== undefined);
}

const levels = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

type Level = NonNullable<Config['log']['level']>;

/**
 * `$SWITCHBOARD_LOG_LEVEL` wins, then `--verbose` (chat: info, start: debug), then `log.level`,
 * then the command's default: info for `start`, error for `chat` — warnings (a retry, say)
 * stay out of the conversation unless asked for.
 */
function logLevel(config: Config, fallback: Level, verbose?: Level): Level {
  const fromEnv = process.env.SWITCHBOARD_LOG_LEVEL;
  if (fromEnv !== undefined && levels.has(fromEnv)) return fromEnv as Level;
  return verbose ?? config.log.level ?? fallback;
}

function safeUsername(): string {
  try {
    return userInfo().username || 'local';
  } catch {
    return 'local';
  }
}

/**
 * The config and database for an operator command (`switchboard memory …`, `pairing …`): the
 * same files as the daemon, without taking the data_dir lock (the daemon may be running) and
 * without requiring the provider's secrets.
 */
function openOperatorDatabase(configFlag: string | undefined): { config: Config; dataDir: string; dbPath: string; db: Db } {
  const file = locateConfig(configFlag === undefined ? {} : { flag: configFlag });
  const { config } = loadConfig(file, process.env, { requireSecrets: false });
  const dataDir = resolve(dirname(file), config.data_dir);
  const dbPath = join(dataDir, 'switchboard.db');
  // The header only: these run beside the daemon, and must not read a big file every time.
  const db = withFileContext({ dataDir, configFile: file }, () => openDatabase(dbPath, { durability: config.runtime.durability, check: 'header' }));
  return { config, dataDir, dbPath, db };
}

/** The shared database of a cluster config (`[store] kind = "postgres"`), for an operator command; undefined for SQLite. */
async function operatorShared(config: Config, log: Logger): Promise<Database | undefined> {
  if (config.store.kind !== 'postgres') return undefined;
  const { openPostgres } = await import('../src/store/postgres/sql.ts');
  return openPostgres({ url: config.store.url!, log, maxConnections: 2 });
}

/** The memory for `switchboard memory …` (no hygiene pass); in a cluster, PostgreSQL's. */
export async function openOperatorMemory(configFlag: string | undefined): Promise<{ memory: Memory; close(): Promise<void> }> {
  const { config, dataDir, dbPath, db } = openOperatorDatabase(configFlag);
  const log = createLogger({ level: logLevel(config, 'warn'), format: config.log.format, stream: process.stderr });
  const shared = await operatorShared(config, log);
  const built = await buildMemory({ config, db, dbPath, dataDir, freshDatabase: false, log, hygiene: false, ...(shared ? { shared } : {}) });
  return {
    memory: built.memory,
    close: async () => {
      await built.close();
      await shared?.close();
      db.close();
    },
  };
}

/** The pairing store for `switchboard pairing …`; in a cluster, PostgreSQL's. */
export async function openOperatorPairing(configFlag: string | undefined): Promise<{ pairing: PairingStore; close(): Promise<void> }> {
  const { config, db } = openOperatorDatabase(configFlag);
  const shared = await operatorShared(config, createLogger({ level: logLevel(config, 'warn'), format: config.log.format, stream: process.stderr }));
  return {
    pairing: new PairingStore(shared ?? sqliteDatabase(db)),
    close: async () => {
      await shared?.close();
      db.close();
    },
  };
}
