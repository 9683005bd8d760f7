/**
 * The composition root: config becomes objects here and nowhere else. Each channel's
 * module is imported only when that channel is configured.
 */
import { existsSync, mkdirSync, realpathSync } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Channel, ChannelContext } from '../src/channel.ts';
import type { Memory } from '../src/memory.ts';
import { createAgent } from '../src/agent/agent.ts';
import { ApprovalStore } from '../src/agent/approvals.ts';
import { createTurnMemory } from '../src/agent/memory-context.ts';
import { ConfigError, loadConfig, locateConfig } from '../src/config/load.ts';
import type { ChannelPolicyConfig, Config } from '../src/config/schema.ts';
import { createLogger, type Logger } from '../src/log.ts';
import { defaultDeliveryOptions } from '../src/runtime/delivery.ts';
import { Runtime, type ChannelPolicy } from '../src/runtime/runtime.ts';
import { ConversationSettings } from '../src/store/settings.ts';
import { defaultSupervisorOptions } from '../src/runtime/supervisor.ts';
import { Scheduler } from '../src/schedule/scheduler.ts';
import { ScheduleStore } from '../src/schedule/store.ts';
import { PairingStore } from '../src/policy/access.ts';
import { openDatabase, type Db } from '../src/store/db.ts';
import { lockDataDir } from '../src/store/lock.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { createGateway, validateGatewayConfig } from '../src/gateway/server.ts';
import { createSwitchboardMetrics, meterToolRunner } from '../src/metrics.ts';
import { createMeteredProvider } from '../src/providers/metered.ts';
import { createToolsRoute } from '../src/tools/sources.ts';
import { buildMemory } from './compose/memory.ts';
import { buildProvider } from './compose/provider.ts';
import { buildTools } from './compose/tools.ts';

export interface DaemonOptions {
  readonly mode: 'start' | 'chat';
  readonly configFlag?: string;
}

/** What a channel factory gets besides its own config section. */
interface ChannelDeps {
  readonly config: Config;
  readonly mode: 'start' | 'chat';
  readonly log: Logger;
  /** Ends a `chat` session once its input has ended and every reply is out. */
  readonly finish: () => void;
  /** What every chat channel gets (see ChannelContext). */
  readonly context: ChannelContext;
}

/** One entry per channel kind; the import runs only when the channel is configured. */
const channelFactories: Record<keyof Config['channels'], (deps: ChannelDeps) => Promise<Channel>> = {
  terminal: async ({ config, mode, finish }) => {
    const { createTerminalChannel } = await import('../channels/terminal/index.ts');
    return createTerminalChannel({
      input: process.stdin,
      output: process.stdout,
      user: config.channels.terminal?.user ?? safeUsername(),
      assistantName: config.agent.name,
      interactive: process.stdin.isTTY === true,
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
};

/** Runs `start` or `chat` until it is told to stop; returns the exit code. Throws ConfigError. */
export async function runDaemon(options: DaemonOptions): Promise<number> {
  const startedAt = performance.now();
  const file = locateConfig(options.configFlag === undefined ? {} : { flag: options.configFlag });
  const { config } = loadConfig(file);
  // Refuse an exposed gateway before anything opens (exit 78).
  const gatewayConfig = options.mode === 'start' ? config.gateway : undefined;
  if (gatewayConfig) validateGatewayConfig(gatewayConfig, file);

  const names = channelNames(config, options.mode);
  if (names.length === 0) {
    throw new ConfigError(file, [{ path: 'channels', problem: 'no channel is configured, so nothing could reach the agent', example: '[channels.terminal]' }]);
  }
  // With the terminal in use, stdout is the conversation: logs go to stderr.
  const log = createLogger({
    level: logLevel(config, options.mode),
    format: config.log.format,
    stream: names.includes('terminal') ? process.stderr : process.stdout,
  });

  const dataDir = resolve(dirname(file), config.data_dir);
  mkdirSync(join(dataDir, 'workspace'), { recursive: true });
  const lock = lockDataDir(dataDir);
  const dbPath = join(dataDir, 'switchboard.db');
  const freshDatabase = !existsSync(dbPath);
  const db = openDatabase(dbPath, { durability: config.runtime.durability });

  const workspace = realpathSync(join(dataDir, 'workspace'));
  // Read only when scraped, so the closure over the runtime built below is fine.
  const metrics = createSwitchboardMetrics({ channels: names, health: () => runtime.health() });
  const provider = createMeteredProvider(await buildProvider(config, log), { meter: metrics, label: config.provider.kind });
  const approvals = new ApprovalStore(db);
  const schedules = new ScheduleStore(db);
  const memory = await buildMemory({ config, db, dbPath, dataDir, freshDatabase, log });
  const tools = await buildTools({
    config,
    workspace,
    provider,
    approvals,
    schedules,
    memory: memory.memory,
    log,
    ...(gatewayConfig?.remote_tools ? { remoteTools: gatewayConfig.remote_tools } : {}),
  });
  const agent = createAgent({
    provider,
    runner: meterToolRunner(tools.runner, metrics),
    approvals,
    name: config.agent.name,
    instructions: config.agent.instructions,
    workspace,
    maxToolIterations: config.agent.max_tool_iterations,
    toolCalling: config.provider.tool_calling,
    ...(config.memory.backend === 'none'
      ? {}
      : {
          memory: createTurnMemory({
            memory: memory.memory,
            autoRecall: config.memory.auto_recall,
            limit: config.memory.recall_limit,
            minScore: config.memory.min_relevance,
            maxChars: config.memory.max_entry_chars,
            autoSave: config.memory.auto_save,
          }),
        }),
  });

  let finish = (): void => undefined;
  // Built before the channels (a channel may serve an endpoint on it), started once all are.
  const gateway = gatewayConfig
    ? createGateway({
        listen: gatewayConfig.listen,
        ...(gatewayConfig.token === undefined ? {} : { token: gatewayConfig.token }),
        log: log.child({ component: 'gateway' }),
        health: () => runtime.health(),
        metrics: () => metrics.render(),
        maxBodyBytes: gatewayConfig.max_body_kb * 1024,
      })
    : undefined;
  const attachments = createAttachmentStore({ workspace, maxBytes: config.runtime.max_attachment_mb * 1024 * 1024 });
  const channels = await Promise.all(
    names.map((name) => {
      const channelLog = log.child({ channel: name });
      const stateDir = join(dataDir, 'channels', name);
      mkdirSync(stateDir, { recursive: true, mode: 0o700 });
      const context: ChannelContext = { name, log: channelLog, assistantName: config.agent.name, attachments, stateDir, ...(gateway ? { gateway } : {}) };
      return channelFactories[name]({ config, mode: options.mode, log: channelLog, finish: () => finish(), context });
    }),
  );
  const settings = new ConversationSettings(db);
  const maxInFlight = config.runtime.max_in_flight > 0 ? config.runtime.max_in_flight : Math.min(64, Math.max(8, channels.length * 4));
  const runtime = new Runtime({
    db,
    log,
    channels,
    agent,
    historyTurns: config.agent.history_turns,
    maxInFlight,
    maxQueued: config.runtime.max_queued,
    turnTimeoutMs: config.agent.turn_timeout_seconds * 1000,
    shutdownGraceMs: config.runtime.shutdown_grace_seconds * 1000,
    supervisor: {
      ...defaultSupervisorOptions,
      initialBackoffMs: config.runtime.restart_initial_seconds * 1000,
      maxBackoffMs: config.runtime.restart_max_seconds * 1000,
      healthyAfterMs: config.runtime.restart_reset_seconds * 1000,
    },
    delivery: defaultDeliveryOptions,
    events: metrics.runtimeEvents,
    policies: channelPolicies(config, names),
    pairing: new PairingStore(db),
    commands: {
      models: configuredModels(config),
      model: (conversation) => settings.model(conversation),
      setModel: (conversation, model) => settings.setModel(conversation, model),
    },
  });

  const scheduler = new Scheduler({ store: schedules, push: runtime.push, log: log.child({ component: 'scheduler' }) });

  // Channels may hold nothing open (the terminal after its input ended, say): the daemon
  // itself stays up until it is told to stop.
  if (gateway) {
    if (tools.remote) gateway.addUpgrade(tools.remote.route);
    gateway.addRoute(createToolsRoute(tools.sources));
    try {
      await gateway.start();
    } catch (error) {
      log.fatal({ err: error, listen: gatewayConfig!.listen }, 'the gateway could not listen (port in use? change [gateway] listen)');
      await tools.close();
      metrics.close();
      await memory.close();
      db.close();
      lock.release();
      return 1;
    }
  }

  const keepAlive = setInterval(() => undefined, 1 << 30);
  const stopped = new Promise<number>((resolveExit) => {
    let stopping = false;
    const stop = (reason: string, code: number): void => {
      if (stopping) return;
      stopping = true;
      log.info({ reason }, 'stopping');
      void scheduler
        .stop()
        .then(() => runtime.stop())
        .then(() => tools.close())
        .then(() => gateway?.stop(1000))
        .then(() => memory.close())
        .catch((error: unknown) => log.error({ err: error }, 'error while stopping'))
        .finally(() => {
          clearInterval(keepAlive);
          metrics.close();
          db.close();
          lock.release();
          resolveExit(code);
        });
    };
    const onSignal = (signal: NodeJS.Signals): void => {
      if (stopping) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(130);
      }
      stop(signal, 0);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    finish = () => void runtime.idle().then(() => stop('input ended', 0));
  });

  runtime.start();
  scheduler.start();
  void runtime.ready.then(() =>
    log.info({ channels: names, maxInFlight, provider: provider.name, startupMs: Math.round(performance.now() - startedAt), config: file }, 'ready'),
  );
  return stopped;
}

/** The conversation policy of each configured chat channel (the terminal has none: it is exempt). */
function channelPolicies(config: Config, names: ReadonlyArray<keyof Config['channels']>): Map<string, ChannelPolicy> {
  const policies = new Map<string, ChannelPolicy>();
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

function channelNames(config: Config, mode: 'start' | 'chat'): Array<keyof Config['channels']> {
  if (mode === 'chat') return ['terminal']; // `chat` always talks through the terminal, and only there
  return (Object.keys(channelFactories) as Array<keyof Config['channels']>).filter((name) => config.channels[name] !== undefined);
}

const levels = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

/** `$SWITCHBOARD_LOG_LEVEL` wins, then `log.level`; `chat` defaults to warn so the conversation stays readable. */
function logLevel(config: Config, mode: 'start' | 'chat'): NonNullable<Config['log']['level']> {
  const fromEnv = process.env.SWITCHBOARD_LOG_LEVEL;
  if (fromEnv !== undefined && levels.has(fromEnv)) return fromEnv as NonNullable<Config['log']['level']>;
  return config.log.level ?? (mode === 'chat' ? 'warn' : 'info');
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
  return { config, dataDir, dbPath, db: openDatabase(dbPath, { durability: config.runtime.durability }) };
}

/** The memory for `switchboard memory …` (no hygiene pass). */
export async function openOperatorMemory(configFlag: string | undefined): Promise<{ memory: Memory; close(): Promise<void> }> {
  const { config, dataDir, dbPath, db } = openOperatorDatabase(configFlag);
  const log = createLogger({ level: logLevel(config, 'chat'), format: config.log.format, stream: process.stderr });
  const built = await buildMemory({ config, db, dbPath, dataDir, freshDatabase: false, log, hygiene: false });
  return {
    memory: built.memory,
    close: async () => {
      await built.close();
      db.close();
    },
  };
}

/** The pairing store for `switchboard pairing …`. */
export async function openOperatorPairing(configFlag: string | undefined): Promise<{ pairing: PairingStore; close(): Promise<void> }> {
  const { db } = openOperatorDatabase(configFlag);
  return {
    pairing: new PairingStore(db),
    close: async () => {
      db.close();
    },
  };
}
