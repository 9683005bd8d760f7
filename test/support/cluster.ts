/**
 * Nodes of a test cluster: daemons on one PostgreSQL, each with its own data_dir and the same
 * channel section, started, killed and restarted by name.
 */
import { after, before } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from '../fixtures/fake-openai.ts';
import { startTelegramPeer, type TelegramPeer } from '../peers/telegram.ts';
import { startDaemon, tempConfig, type Daemon } from './cli.ts';
import { startPostgres, type TestPostgres } from './postgres.ts';

export interface ClusterNodeHandle {
  readonly name: string;
  daemon: Daemon;
  /** Everything every run of this node printed (a restart starts a new daemon). */
  stdout(): string;
}

export interface TestCluster {
  readonly nodes: readonly ClusterNodeHandle[];
  /** Starts a node again after it was killed (same config and data_dir). */
  restart(node: ClusterNodeHandle): void;
  /** Resolves when `node` has joined the cluster (its current run). */
  joined(node: ClusterNodeHandle, timeoutMs?: number): Promise<void>;
  /** The node whose current run holds a channel lease (by its log), if any. */
  holder(): ClusterNodeHandle | undefined;
  /** The node's config file (rewrite it and send SIGHUP to reload). */
  configFile(node: ClusterNodeHandle): string;
  /** The last lines of each node's output, for a failure message. */
  tail(): string;
  /** SIGKILLs what still runs and deletes the configs. */
  close(): Promise<void>;
}

export interface ClusterOptions {
  /** The PostgreSQL database; undefined = one node on SQLite (for comparisons). */
  readonly url: string | undefined;
  readonly modelUrl: string;
  /** The channel tables (the same on every node, or per node by name). */
  readonly channels: string | ((node: string) => string);
  readonly names?: readonly string[];
  readonly failoverSeconds?: number;
  readonly env?: Record<string, string>;
}

const HOLDS = /"msg":"this node now holds the channel"/g;
const LOST = /"msg":"(lost|released) the channel lease/g;

export function startCluster(options: ClusterOptions): TestCluster {
  const configs: Array<{ file: string; cleanup(): void }> = [];
  const earlier = new Map<string, string>();
  const launch = (name: string, file: string): Daemon =>
    startDaemon(['start', '--config', file], { env: { TEST_MODEL_KEY: 'sk-cluster', SWITCHBOARD_LOG_LEVEL: 'info', ...options.env } });
  const nodes: ClusterNodeHandle[] = (options.names ?? ['n1', 'n2', 'n3']).map((name) => {
    const config = tempConfig(
      options.modelUrl,
      `[log]\nformat = "json"\n${options.url === undefined ? '' : `[store]\nkind = "postgres"\nurl = "${options.url}"\n[cluster]\nnode = "${name}"\nfailover_seconds = ${options.failoverSeconds ?? 3}\n`}${typeof options.channels === 'string' ? options.channels : options.channels(name)}`,
    );
    configs.push(config);
    const handle: ClusterNodeHandle = {
      name,
      daemon: launch(name, config.file),
      stdout: () => `${earlier.get(name) ?? ''}${handle.daemon.stdout()}`,
    };
    return handle;
  });
  const fileOf = (node: ClusterNodeHandle): string => configs[nodes.indexOf(node)]!.file;
  const alive = (daemon: Daemon): boolean => daemon.child.exitCode === null && daemon.child.signalCode === null;
  return {
    nodes,
    restart(node) {
      earlier.set(node.name, node.stdout());
      node.daemon = launch(node.name, fileOf(node));
    },
    configFile: fileOf,
    joined: (node, timeoutMs = 30_000) => node.daemon.waitFor(options.url === undefined ? /"msg":"ready"/ : /"msg":"joined the cluster/, 'stdout', timeoutMs),
    holder() {
      return nodes.find((node) => alive(node.daemon) && (node.daemon.stdout().match(HOLDS)?.length ?? 0) > (node.daemon.stdout().match(LOST)?.length ?? 0));
    },
    tail: () => nodes.map((node) => `--- ${node.name} stdout:\n${node.daemon.stdout().slice(-3000)}\nstderr:\n${node.daemon.stderr().slice(-1000)}`).join('\n'),
    async close() {
      for (const node of nodes) if (alive(node.daemon)) node.daemon.child.kill('SIGKILL');
      await Promise.all(nodes.map((node) => node.daemon.exited));
      for (const config of configs) config.cleanup();
    },
  };
}

/** What a cluster test suite shares: its servers, and the cluster a test left running. */
export interface ClusterSuite {
  pg: TestPostgres;
  model: FakeOpenAI;
  peer: TelegramPeer;
  /** Set it to the cluster a test starts: stopped after the suite if the test did not get to. */
  cluster: TestCluster | undefined;
}

/**
 * A PostgreSQL server, the scripted model and a Telegram peer, started before the suite's tests
 * and stopped after them (with any cluster left running). Call inside `describe`.
 */
export function clusterSuite(): ClusterSuite {
  const suite = { cluster: undefined } as ClusterSuite;
  before(async () => {
    suite.pg = await startPostgres();
    suite.model = await startFakeOpenAI();
    suite.peer = await startTelegramPeer();
  });
  after(async () => {
    await suite.cluster?.close();
    await suite.model?.close();
    await suite.peer?.close();
    suite.pg?.stop();
  });
  return suite;
}
