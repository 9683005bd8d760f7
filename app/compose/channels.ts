/**
 * The channels, from the registry: which are configured, each built by its own module (whose
 * code, and SDK, is imported only then) with the context every chat channel gets, their
 * conversation policies, and the browser chat of the console.
 */
import { join } from 'node:path';
import type { WebChannel } from '../../channels/web/index.ts';
import type { AttachmentStore, Channel, ChannelContext } from '../../src/channel.ts';
import type { ChannelDeps, ChannelModule } from '../../src/channel-module.ts';
import { ConfigError } from '../../src/config/load.ts';
import type { ChannelPolicyConfig } from '../../src/config/fields.ts';
import type { Config } from '../../src/config/schema.ts';
import type { GatewayRoutes } from '../../src/route.ts';
import type { Logger } from '../../src/log.ts';
import type { ChannelPolicy } from '../../src/runtime/runtime.ts';
import { channelState } from '../../src/store/channel-state.ts';
import { makeDirectory } from '../../src/store/files.ts';
import type { Database } from '../../src/store/sql.ts';
import type { StorageHealth } from '../../src/store/storage.ts';

/** The configured channels' names, in the registry's order; `chat` always talks through the terminal, and only there. */
export function channelNames(modules: readonly ChannelModule[], config: Config, mode: 'start' | 'chat'): string[] {
  if (mode === 'chat') return ['terminal'];
  return modules.map((module) => module.name).filter((name) => config.channels[name] !== undefined);
}

export interface ChannelBuilderDeps {
  readonly modules: readonly ChannelModule[];
  readonly mode: 'start' | 'chat';
  readonly dataDir: string;
  readonly database: Database;
  readonly storage: StorageHealth;
  readonly attachments: AttachmentStore;
  readonly log: Logger;
  /** Late-bound: the stop logic is made after the channels. */
  readonly finish: ChannelDeps['finish'];
  readonly interrupt: ChannelDeps['interrupt'];
}

/** Builds channels by name (a reload's too) and remembers the latest of each, for what the tools ask of a turn's channel. */
export interface ChannelBuilder {
  build(name: string, from: Config, routes: GatewayRoutes | undefined): Promise<Channel>;
  readonly built: ReadonlyMap<string, Channel>;
  /** The browser chat of the console, as the channel `name`. */
  buildWeb(name: string, from: Config): Promise<WebChannel>;
}

export function createChannelBuilder(deps: ChannelBuilderDeps): ChannelBuilder {
  const built = new Map<string, Channel>();
  const contextFor = (name: string, from: Config, routes?: GatewayRoutes): ChannelContext => {
    const stateDir = join(deps.dataDir, 'channels', name);
    makeDirectory(stateDir);
    return {
      name,
      log: deps.log.child({ channel: name }),
      assistantName: from.agent.name,
      attachments: deps.attachments,
      state: channelState(deps.database, name),
      stateDir,
      storage: deps.storage,
      ...(routes ? { gateway: routes } : {}),
    };
  };
  return {
    built,
    build: async (name, from, routes) => {
      const module = deps.modules.find((candidate) => candidate.name === name);
      if (!module) throw new Error(`no channel module named ${name}`);
      const context = contextFor(name, from, routes);
      const channel = await module.create(from.channels[name] as never, { config: from, mode: deps.mode, log: context.log, finish: () => deps.finish(), interrupt: () => deps.interrupt(), context });
      built.set(name, channel);
      return channel;
    },
    buildWeb: async (name, from) => {
      const { createWebChannel } = await import('../../channels/web/index.ts');
      const { gateway: _none, ...context } = contextFor(name, from);
      return createWebChannel(context);
    },
  };
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
export function channelPolicies(config: Config, names: readonly string[], web?: string): Map<string, ChannelPolicy> {
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

/** The allow list of each configured chat channel, for the console's People page. */
export function allowLists(names: readonly string[], config: Config): Record<string, readonly string[] | undefined> {
  return Object.fromEntries(names.filter((name) => name !== 'terminal').map((name) => [name, (config.channels[name] as ChannelPolicyConfig | undefined)?.allow]));
}

/**
 * `start` with nothing that could reach the agent: neither a channel table nor the browser chat
 * (the console of `[gateway]`). Names both ways in, and how this file has the console off.
 */
export function noChannelError(file: string, config: Config, modules: readonly ChannelModule[]): ConfigError {
  const tables = modules.map((module) => module.name).filter((name) => name !== 'terminal');
  const web =
    config.gateway === undefined
      ? 'or turn on the browser chat: add a `[gateway]` table with `listen = "127.0.0.1:8787"` (its `console = true` is the default) and open http://127.0.0.1:8787/'
      : `or turn on the browser chat: set \`[gateway] console = true\` (it is false here) and open http://${config.gateway.listen}/`;
  return new ConfigError(file, [
    {
      path: 'channels',
      problem:
        `no channel is enabled, so nothing could reach the agent: uncomment the table of the one you want in this file (${tables.join(', ')}; terminal for a chat in this terminal) and give it its token, ` +
        `${web}. To talk to the agent here first, run \`switchboard chat\` (npm run chat): it needs no channel`,
      example: config.gateway === undefined ? '[gateway] listen = "127.0.0.1:8787"' : '[gateway] console = true',
    },
  ]);
}

/** Whether `chat` needs the secret at this config key: not for what only `start` opens (the gateway, other channels, the cluster's store). */
export function chatNeedsSecret(path: readonly string[]): boolean {
  const [table, name] = path;
  if (table === 'gateway' || table === 'store' || table === 'cluster') return false;
  return table !== 'channels' || name === 'terminal';
}
