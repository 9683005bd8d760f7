/**
 * The composition root: config becomes objects here and nowhere else. Each piece is built by
 * its own module in app/compose/ — logger and data dir, cluster, memory, agent (provider and
 * tools), channels (from the registry; a channel's code is imported only when it is
 * configured), gateway and console — and wired together here, in start-up order.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { channelModules } from '../channels/registry.ts';
import { canSendFiles } from '../src/channel.ts';
import { ApprovalStore } from '../src/agent/approvals.ts';
import type { Config } from '../src/config/schema.ts';
import { createLogTail } from '../src/log.ts';
import { createSwitchboardMetrics } from '../src/metrics.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { PairingStore } from '../src/policy/access.ts';
import { defaultDeliveryOptions } from '../src/runtime/delivery.ts';
import { Runtime, type ChannelPolicy, type RuntimeOptions } from '../src/runtime/runtime.ts';
import { defaultSupervisorOptions } from '../src/runtime/supervisor.ts';
import { Scheduler } from '../src/schedule/scheduler.ts';
import { ScheduleStore } from '../src/schedule/store.ts';
import { explainIn } from '../src/store/files.ts';
import { ConversationSettings } from '../src/store/settings.ts';
import { sqliteDatabase } from '../src/store/sqlite-sql.ts';
import { StorageHealth } from '../src/store/storage.ts';
import { buildAgent, configuredModels } from './compose/agent.ts';
import { allowLists, channelNames, channelPolicies, chatNeedsSecret, createChannelBuilder, noChannelError, webChannelName } from './compose/channels.ts';
import { daemonLogger, openDataDir } from './compose/data-dir.ts';
import { addReloadRoute, openGateway, serveConsole } from './compose/gateway.ts';
import { buildMemory } from './compose/memory.ts';
import { handleStop, type Stopper } from './compose/stop.ts';
import { loadConfig, locateConfig } from './config.ts';
import { configPort, nodeName, recordRecalls } from './console.ts';
import { settleHeap, tuneHeap } from './heap.ts';
import { announceReady } from './ready.ts';
import { localTurns } from './compose/turns.ts';
import { createReloader } from './reload.ts';

export { EXIT_UNANSWERED } from './compose/stop.ts';
export { chatNeedsSecret, webChannelName } from './compose/channels.ts';

export interface DaemonOptions {
  readonly mode: 'start' | 'chat';
  readonly configFlag?: string;
  /** `--verbose`: `chat` logs from info (instead of errors only), `start` from debug. */
  readonly verbose?: boolean;
}

/** Runs `start` or `chat` until it is told to stop; returns the exit code. Throws ConfigError. */
export async function runDaemon(options: DaemonOptions): Promise<number> {
  const startedAt = performance.now();
  const modules = channelModules;
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

  const names = channelNames(modules, config, options.mode);
  // The web console (served by the gateway, loaded on its first request) keeps the last log
  // lines for its live tail, and adds the browser chat as the `web` channel: a channel that
  // counts, so a daemon with only the console on starts (and is reached from the browser).
  const consoleOn = gatewayConfig !== undefined && gatewayConfig.console;
  if (names.length === 0 && !consoleOn) throw noChannelError(file, config, modules);
  const logTail = consoleOn ? createLogTail() : undefined;
  const log = daemonLogger(config, options.mode, options.verbose, names, logTail);
  const { dataDir, dbPath, files, workspace, lock, db, freshDatabase } = openDataDir(config, file, names);

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
  const local = cluster ? undefined : sqliteDatabase(db);
  const database = cluster?.database ?? local!;
  const approvals = new ApprovalStore(database);
  const schedules = new ScheduleStore(database);
  const memory = await buildMemory({ config, db, dbPath, dataDir, freshDatabase, log, ...(cluster ? { shared: cluster.database } : { write: (work) => local!.write(work) }) });
  // Recall is remembered per turn for the console's transcripts (only when it is on).
  const recalled = consoleOn ? recordRecalls(memory.memory) : undefined;

  // Made once the runtime is: until then a channel's Ctrl-C or end of input has nothing to stop.
  const stopping: { stopper?: Stopper } = {};
  const attachments = createAttachmentStore({ workspace, maxBytes: config.runtime.max_attachment_mb * 1024 * 1024 });
  const builder = createChannelBuilder({
    modules,
    mode: options.mode,
    dataDir,
    database,
    storage,
    attachments,
    log,
    finish: () => stopping.stopper?.finish(),
    interrupt: () => stopping.stopper?.interrupt(),
  });
  const agent = await buildAgent(config, {
    workspace,
    log,
    metrics,
    approvals,
    schedules,
    memory: memory.memory,
    recallFrom: recalled?.memory ?? memory.memory,
    remoteTools: gatewayConfig?.remote_tools,
    ...(cluster ? { peers: cluster.remoteTools } : {}),
    // What the tools ask of a turn's channel: the channels built so far by name (a reload's too).
    maxFileBytes: (name) => {
      const channel = builder.built.get(name);
      return channel && canSendFiles(channel) ? channel.maxFileBytes : undefined;
    },
    onToolsReplaced: (built) => gateway?.stageToolRoutes(built).commit(),
  });

  const gateway = gatewayConfig
    ? openGateway({ module: gatewayModule!, config: gatewayConfig, log, health: () => runtime.health(), ...(cluster ? { cluster: () => cluster!.status() } : {}), metrics: () => metrics.render() })
    : undefined;
  const channels = await Promise.all(
    names.map(async (name) => {
      const staged = gateway?.routes.stage(name);
      const channel = await builder.build(name, config, staged?.routes);
      staged?.commit();
      return channel;
    }),
  );
  const webChannel = consoleOn ? await builder.buildWeb(webChannelName(cluster?.node), config) : undefined;
  if (webChannel) channels.push(webChannel);
  const pairing = new PairingStore(database);
  const settings = new ConversationSettings(database);
  const runtime = new Runtime({
    database,
    log,
    // cluster mode: each channel is added when this node takes its lease
    channels: cluster ? [] : channels,
    agent: (input) => agent.current.agent(input),
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
    // the mode is chosen here, once: pg-boss and the reply wake-up in a cluster, memory on one node
    ...(cluster?.turns ?? localTurns(maxInFlight, config.runtime.max_queued)),
    ...turnSettings(config),
  });
  function turnSettings(from: Config): { policies: Map<string, ChannelPolicy>; commands: NonNullable<RuntimeOptions['commands']>; historyTurns: number; turnTimeoutMs: number } {
    return {
      policies: channelPolicies(from, channelNames(modules, from, options.mode), webChannel?.name),
      commands: {
        models: configuredModels(from),
        model: (conversation) => settings.model(conversation),
        setModel: (tx, conversation, model) => settings.in(tx).setModel(conversation, model),
      },
      historyTurns: from.agent.history_turns,
      turnTimeoutMs: from.agent.turn_timeout_seconds * 1000,
    };
  }

  const reloader =
    options.mode === 'start'
      ? createReloader({
          initial: config,
          load: () => loadConfig(file).config,
          log,
          // in a cluster a channel runs where its lease is held
          runtime: cluster ? cluster.reloadable(runtime) : runtime,
          buildChannel: (name, from, routes) => builder.build(name, from, routes),
          rebuildAgent: (from, diff) => agent.rebuild(from, diff),
          applySettings: (from) => runtime.reconfigure(turnSettings(from)),
          ...(gateway ? { routes: gateway.routes } : {}),
        })
      : undefined;

  const scheduler = new Scheduler({ store: schedules, push: runtime.push, log: log.child({ component: 'scheduler' }) });

  // Channels may hold nothing open (the terminal after its input ended, say): the daemon
  // itself stays up until it is told to stop.
  if (gateway) {
    gateway.stageToolRoutes(agent.current.tools).commit();
    if (reloader) addReloadRoute(gateway.routes, reloader);
  }
  if (gateway && consoleOn) {
    serveConsole(gateway, gatewayConfig!, log, async () => {
      const { createConsoleQueries } = await import('../src/console/queries.ts');
      const { statusReport } = gatewayModule!;
      const { listTools } = await import('../src/tools/sources.ts');
      // The console's tools list is read synchronously: the built-ins are in it before it is served.
      await agent.current.tools.load();
      const current = (): Config => reloader?.current() ?? config;
      return {
        // Awaited: the runtime's reads may become asynchronous (the PostgreSQL backend).
        overview: async () => ({
          status: statusReport(runtime.health(), Math.round(Date.now() - process.uptime() * 1000), process.uptime() * 1000, gateway.version, cluster?.status()),
          model: current().provider.model,
          node: cluster?.node ?? nodeName(),
          activity: metrics.activity.minutes(),
        }),
        restartChannel: (name) => runtime.restartChannel(name),
        queries: createConsoleQueries(database),
        pairing,
        approvals,
        allowLists: () => allowLists(channelNames(modules, current(), 'start'), current()),
        memory: memory.memory,
        tools: () => listTools(agent.current.tools.sources).tools.map(({ name, description, source }) => ({ name, description, source })),
        remoteClients: () => agent.current.tools.remote?.clients().map((client) => client.id) ?? [],
        toolCalls: () => metrics.activity.toolCalls(),
        ...(logTail ? { logs: logTail } : {}),
        ...(reloader ? { config: configPort({ file, current, reload: () => reloader.reload() }) } : {}),
        chat: webChannel,
        ...(recalled ? { recalls: recalled.recalls } : {}),
      };
    });
  }
  /** Closes what start opened, when it cannot go on. */
  const abandon = async (): Promise<void> => {
    await agent.current.tools.close();
    metrics.close();
    await memory.close();
    await cluster?.leave();
    db.close();
    lock.release();
  };
  if (gateway) {
    try {
      await gateway.gateway.start();
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
    await gateway?.gateway.stop(0);
    await abandon();
    throw explainIn(error, files, `write the pid file ${pidFile}`);
  }
  const keepAlive = setInterval(() => undefined, 1 << 30);
  const announcing = new AbortController();
  const stopper = handleStop({
    log,
    mode: options.mode,
    runtime,
    ...(reloader ? { reload: () => reloader.reload() } : {}),
    onStopping: () => announcing.abort(),
    shutdown: () =>
      scheduler
        .stop()
        .then(() => runtime.stop())
        .then(() => cluster?.leave())
        .then(() => agent.current.tools.close())
        .then(() => gateway?.gateway.stop(1000))
        .then(() => memory.close()),
    release: () => {
      clearInterval(keepAlive);
      if (pidFile) rmSync(pidFile, { force: true });
      metrics.close();
      db.close();
      lock.release();
    },
  });

  stopping.stopper = stopper;

  await runtime.start();
  await cluster?.join(runtime, channels);
  scheduler.start();
  // Logged also while a channel keeps failing, naming it (app/ready.ts).
  announceReady({
    runtime,
    log,
    signal: announcing.signal,
    fields: () => ({ channels: webChannel ? [...names, webChannel.name] : names, maxInFlight, provider: agent.provider.name, startupMs: Math.round(performance.now() - startedAt), config: file }),
    // What can follow ready: the memory hygiene pass, and giving back what start-up allocated
    // and an idle daemon does not keep (app/heap.ts).
    // The built-in tools' modules (shell, files, HTTP and its SSRF guard…) are not loaded here:
    // they load on first use — a turn, /api/tools, the console or a remote-tool client waits for
    // them (app/compose/tools.ts) — so an idle daemon never holds them (−1.5 MB RSS at idle).
    onReady: () => {
      memory.startHygiene();
      settleHeap(config.runtime.heap);
    },
  });
  return stopper.stopped;
}
