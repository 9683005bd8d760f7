/**
 * Config reload (SIGHUP, `switchboard reload`, `POST /api/reload`): what changed between the
 * running config and the file, and applying it without a restart — a changed channel is
 * rebuilt and restarted alone, the agent (provider, tools, policy) is rebuilt for the next
 * turn, and keys only a restart can apply are named and left as they were. Everything new is
 * built before anything is swapped, so an invalid file (or a channel that cannot be built)
 * changes nothing.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Channel } from '../src/channel.ts';
import { ConfigError, formatProblems, type ConfigProblem } from '../src/config/load.ts';
import type { Config } from '../src/config/schema.ts';
import type { GatewayRoutes, HttpRoute, RouteAuth, UpgradeRoute } from '../src/route.ts';
import { sendJson } from '../src/http/json.ts';

type ChannelName = keyof Config['channels'];

/** What a new config changes, section by section. */
export interface ConfigDiff {
  /** Channels whose `[channels.X]` changed: rebuilt and restarted alone. */
  readonly restarted: ChannelName[];
  readonly added: ChannelName[];
  readonly removed: ChannelName[];
  /** The model endpoint(s) must be rebuilt ([provider], [[routes]]). */
  readonly provider: boolean;
  /** The tools must be rebuilt ([tools], [security], [agents], [mcp], tool timeouts…). */
  readonly tools: boolean;
  /** The turn handler must be rebuilt (any of the above, [agent], memory recall settings). */
  readonly agent: boolean;
  /** Changed keys that only a restart applies; their old values stay in force. */
  readonly needsRestart: string[];
}

/** How a rejected reload's report ends: unlike at start, something is running, and stays as it was. */
export const reloadRejected = 'The running daemon keeps the config it had. Fix the file, then run `switchboard reload` again.';

/** Memory keys read per turn; every other `[memory]` key is read once, at start. */
const memoryPerTurn = ['auto_recall', 'recall_limit', 'min_relevance', 'max_entry_chars', 'auto_save'] as const;
/** Keys in other sections that the tools are built from. */
const toolKeys = ['agent.tool_timeout_seconds', 'agent.max_delegate_depth', 'provider.tool_calling', 'memory.max_entry_chars'];

/** Compares the running config with a new one (`channels` = the channels running, in `start` mode all configured). */
export function diffConfig(old: Config, next: Config): ConfigDiff {
  const changed = (a: unknown, b: unknown): boolean => stableJson(a) !== stableJson(b);
  const oldNames = Object.keys(old.channels).filter((n) => old.channels[n as ChannelName] !== undefined) as ChannelName[];
  const newNames = Object.keys(next.channels).filter((n) => next.channels[n as ChannelName] !== undefined) as ChannelName[];
  const restarted = oldNames.filter((n) => newNames.includes(n) && changed(old.channels[n], next.channels[n]));
  const added = newNames.filter((n) => !oldNames.includes(n));
  const removed = oldNames.filter((n) => !newNames.includes(n));

  const needsRestart: string[] = [];
  if (changed(old.data_dir, next.data_dir)) needsRestart.push('data_dir');
  for (const section of ['log', 'runtime', 'gateway'] as const) needsRestart.push(...changedKeys(section, old[section], next[section]));
  const memoryAtStart = (memory: Config['memory']): Record<string, unknown> =>
    Object.fromEntries(Object.entries(memory).filter(([key]) => !(memoryPerTurn as readonly string[]).includes(key)));
  needsRestart.push(...changedKeys('memory', memoryAtStart(old.memory), memoryAtStart(next.memory)));

  // agent.max_images is read by each endpoint's vision decorator, so it rebuilds the endpoints too.
  const provider = changed(old.provider, next.provider) || changed(old.routes, next.routes) || old.agent.max_images !== next.agent.max_images;
  const tools =
    changed(old.tools, next.tools) ||
    changed(old.security, next.security) ||
    changed(old.agents, next.agents) ||
    changed(old.mcp, next.mcp) ||
    toolKeys.some((path) => changed(valueAt(old, path), valueAt(next, path)));
  const agent = provider || tools || changed(old.agent, next.agent) || changed(old.transcription, next.transcription) || memoryPerTurn.some((key) => changed(old.memory[key], next.memory[key]));
  return { restarted, added, removed, provider, tools, agent, needsRestart };
}

/**
 * The config that runs after a reload: the new file, except the keys that need a restart,
 * which keep their running values (so the next reload names them again until a restart).
 */
export function effectiveConfig(old: Config, next: Config): Config {
  const memory = { ...old.memory } as Record<string, unknown>;
  for (const key of memoryPerTurn) memory[key] = next.memory[key];
  const kept = { ...next, data_dir: old.data_dir, log: old.log, runtime: old.runtime, memory: memory as Config['memory'] };
  return old.gateway === undefined ? (({ gateway: _dropped, ...rest }) => rest as Config)(kept) : { ...kept, gateway: old.gateway };
}

/** `section.key` for every key of `section` that differs (the section itself when one side is absent). */
function changedKeys(section: string, a: unknown, b: unknown): string[] {
  if (stableJson(a) === stableJson(b)) return [];
  if (!isRecord(a) || !isRecord(b)) return [section];
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return keys.filter((key) => stableJson(a[key]) !== stableJson(b[key])).map((key) => `${section}.${key}`);
}

function valueAt(config: Config, path: string): unknown {
  let value: unknown = config;
  for (const part of path.split('.')) value = isRecord(value) ? value[part] : undefined;
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON with object keys sorted, so a reordered TOML table is not a change. */
export function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (isRecord(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]])) : v)) ?? 'undefined';
}

// ---------------------------------------------------------------------------------------------
// Gateway routes that can be replaced

/** Routes registered by one owner (a channel, the tools), applied together on `commit`. */
export interface StagedRoutes {
  readonly routes: GatewayRoutes;
  /** Replaces every route `owner` had with the ones registered since `stage`. */
  commit(): void;
}

/**
 * The gateway's routes by owner. The gateway itself cannot remove or replace a route, so each
 * path is registered there once, as a proxy to whichever owner holds it now: a rebuilt
 * channel (or tool set) takes over its endpoints, a removed one's answer 404.
 */
export interface RouteTable {
  stage(owner: string): StagedRoutes;
  /** Removes every route `owner` had. */
  drop(owner: string): void;
}

export function createRouteTable(gateway: GatewayRoutes): RouteTable {
  const http = new Map<string, { owner: string; route: HttpRoute }>();
  const upgrades = new Map<string, { owner: string; route: UpgradeRoute }>();
  const proxied = new Map<string, RouteAuth>();

  const proxy = (key: string, auth: RouteAuth, register: () => void): void => {
    const existing = proxied.get(key);
    if (existing === undefined) {
      register();
      proxied.set(key, auth);
    } else if (existing !== auth) {
      throw new TypeError(`gateway route ${key} cannot change its authentication without a restart`);
    }
  };
  const checkFree = (table: Map<string, { owner: string }>, key: string, owner: string): void => {
    const holder = table.get(key)?.owner;
    if (holder !== undefined && holder !== owner) throw new TypeError(`gateway route ${key} is already registered by ${holder}`);
  };
  const drop = (owner: string): void => {
    for (const table of [http, upgrades] as Array<Map<string, { owner: string }>>) {
      for (const [key, entry] of table) if (entry.owner === owner) table.delete(key);
    }
  };

  return {
    stage(owner) {
      const staged: { http: HttpRoute[]; upgrades: UpgradeRoute[] } = { http: [], upgrades: [] };
      return {
        routes: {
          addRoute(route) {
            checkFree(http, `${route.method} ${route.path}`, owner);
            staged.http.push(route);
          },
          addUpgrade(route) {
            checkFree(upgrades, `UPGRADE ${route.path}`, owner);
            staged.upgrades.push(route);
          },
        },
        commit() {
          for (const route of staged.http) {
            const key = `${route.method} ${route.path}`;
            proxy(key, route.auth, () =>
              gateway.addRoute({
                method: route.method,
                path: route.path,
                auth: route.auth,
                admit: (request: IncomingMessage) => http.get(key)?.route.admit?.(request) ?? {},
                handle: (request: IncomingMessage, response: ServerResponse, body: Buffer) => {
                  const current = http.get(key);
                  if (!current) return sendJson(response, 404, { error: `no such endpoint: ${route.path}` });
                  return current.route.handle(request, response, body);
                },
              }),
            );
          }
          for (const route of staged.upgrades) {
            const key = `UPGRADE ${route.path}`;
            proxy(key, route.auth, () =>
              gateway.addUpgrade({
                path: route.path,
                auth: route.auth,
                handle: (request: IncomingMessage, socket: Duplex, head: Buffer) => {
                  const current = upgrades.get(key);
                  if (!current) return void socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
                  current.route.handle(request, socket, head);
                },
              }),
            );
          }
          drop(owner);
          for (const route of staged.http) http.set(`${route.method} ${route.path}`, { owner, route });
          for (const route of staged.upgrades) upgrades.set(`UPGRADE ${route.path}`, { owner, route });
        },
      };
    },
    drop,
  };
}

// ---------------------------------------------------------------------------------------------
// Applying a reload

/** What a reload did (or why it did nothing); `POST /api/reload` answers this. */
export type ReloadResult =
  | {
      readonly ok: true;
      readonly restarted: readonly string[];
      readonly added: readonly string[];
      readonly removed: readonly string[];
      readonly agentRebuilt: boolean;
      readonly needsRestart: readonly string[];
    }
  | { readonly ok: false; readonly error: string; readonly problems?: readonly ConfigProblem[] };

/** A rebuilt part, ready to be swapped in (or thrown away when something else failed). */
export interface Prepared {
  commit(): Promise<void> | void;
  discard(): Promise<void> | void;
}

/** The channel operations a reload needs (the Runtime's). */
export interface ReloadableChannels {
  addChannel(channel: Channel): Promise<void>;
  replaceChannel(channel: Channel): Promise<void>;
  removeChannel(name: string): Promise<void>;
}

export interface ReloaderOptions {
  /** The config the daemon started with. */
  readonly initial: Config;
  /** Reads and validates the file again; throws ConfigError. */
  readonly load: () => Config;
  readonly log: Logger;
  readonly runtime: ReloadableChannels;
  /** Builds (does not start) a channel from `config`, registering its endpoints on `routes`. */
  buildChannel(name: ChannelName, config: Config, routes: GatewayRoutes | undefined): Promise<Channel>;
  /** Builds the parts of the agent the diff says changed; commit swaps them in for the next turn. */
  rebuildAgent(config: Config, diff: ConfigDiff): Promise<Prepared>;
  /** Applies per-turn settings (policies, commands, history…) of the new config; must not throw. */
  applySettings(config: Config): void;
  /** Gateway routes by owner (when the gateway runs). */
  readonly routes?: RouteTable;
}

export interface Reloader {
  /** Re-reads the config and applies it; reloads run one at a time. Never rejects. */
  reload(): Promise<ReloadResult>;
  /** The config in force. */
  current(): Config;
}

/** @example const reloader = createReloader({ initial: config, load: () => loadConfig(file).config, log, runtime, buildChannel, rebuildAgent, applySettings }); */
export function createReloader(options: ReloaderOptions): Reloader {
  const { log } = options;
  let current = options.initial;
  let queue: Promise<unknown> = Promise.resolve();

  async function apply(): Promise<ReloadResult> {
    let next: Config;
    try {
      next = options.load();
    } catch (error) {
      if (error instanceof ConfigError) {
        // Without what each key got: the log reaches the console's Logs page, and a value that is
        // wrong may be a secret (a token of the wrong type, a URL with its password).
        log.error({ problems: error.problems.map((p) => `${p.path}: ${p.problem.replace(/, got [\s\S]*$/, '')}`) }, 'config reload rejected: the new config is invalid; the old one keeps running');
        return { ok: false, error: formatProblems(error.file, error.problems, reloadRejected), problems: error.problems };
      }
      log.error({ err: error }, 'config reload rejected: the config could not be read; the old one keeps running');
      return { ok: false, error: `the config could not be read: ${error instanceof Error ? error.message : String(error)}. ${reloadRejected}` };
    }
    const diff = diffConfig(current, next);
    const config = effectiveConfig(current, next);

    // Build everything first: a failure here changes nothing.
    const built: Array<{ name: ChannelName; channel: Channel; staged?: StagedRoutes }> = [];
    let agent: Prepared | undefined;
    try {
      if (diff.agent) agent = await options.rebuildAgent(config, diff);
      for (const name of [...diff.restarted, ...diff.added]) {
        const staged = options.routes?.stage(name);
        built.push({ name, channel: await options.buildChannel(name, config, staged?.routes), ...(staged ? { staged } : {}) });
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log.error({ err: error }, 'config reload rejected: a part of the new config could not be built; the old one keeps running');
      await Promise.resolve(agent?.discard()).catch((failure: unknown) => log.warn({ err: failure }, 'discarding the rebuilt agent failed'));
      return { ok: false, error: `a part of the new config could not be built: ${message}. ${reloadRejected}` };
    }

    // Swap: settings and agent first (the next turn uses them), then the channels one by one.
    current = config;
    options.applySettings(config);
    await agent?.commit();
    for (const { name, channel, staged } of built) {
      staged?.commit();
      await (diff.added.includes(name) ? options.runtime.addChannel(channel) : options.runtime.replaceChannel(channel));
    }
    for (const name of diff.removed) {
      await options.runtime.removeChannel(name);
      options.routes?.drop(name);
    }
    const result = { ok: true as const, restarted: diff.restarted, added: diff.added, removed: diff.removed, agentRebuilt: diff.agent, needsRestart: diff.needsRestart };
    if (diff.needsRestart.length > 0) log.warn({ keys: diff.needsRestart }, 'these config changes need a restart to apply; the old values stay in force until then');
    log.info({ restarted: result.restarted, added: result.added, removed: result.removed, agentRebuilt: result.agentRebuilt, needsRestart: result.needsRestart }, 'config reloaded');
    return result;
  }

  return {
    reload() {
      const run = queue.then(apply, apply).catch((error: unknown): ReloadResult => {
        // A swap step failed half-way (a channel would not stop): say so; the daemon keeps running.
        log.error({ err: error }, 'config reload failed while applying; some changes may not be in force — restart to be sure');
        return { ok: false, error: error instanceof Error ? error.message : String(error) };
      });
      queue = run;
      return run;
    },
    current: () => current,
  };
}
