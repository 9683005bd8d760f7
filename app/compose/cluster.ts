/**
 * Cluster mode (`[store] kind = "postgres"`), loaded only then: PostgreSQL for every store, the
 * pg-boss turn queue, a lease per channel, the reply wake-up, and this node's report every few
 * seconds. What the runtime sees is a Database, a TurnQueue and a ReplyRoute; which node holds
 * which channel is decided here.
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Channel } from '../../src/channel.ts';
import { NODE_REPORT_MS, NodeRegistry, type ClusterNode } from '../../src/cluster/nodes.ts';
import { createPgBossQueue } from '../../src/cluster/pg-boss-queue.ts';
import { startLeases, type Leases } from '../../src/cluster/leases.ts';
import { clusterReplies, listenForReplies, type ReplyListener } from '../../src/cluster/replies.ts';
import { startRemoteToolBridge, type RemoteToolBridge } from '../../src/cluster/remote-tools.ts';
import type { Config } from '../../src/config/schema.ts';
import type { Runtime } from '../../src/runtime/runtime.ts';
import type { ReloadableChannels } from '../reload.ts';
import { openPostgres, redactUrl } from '../../src/store/postgres/sql.ts';
import { storeUnavailable } from '../../src/store/postgres/unavailable.ts';
import type { Database } from '../../src/store/sql.ts';
import { packageVersion } from '../../src/version.ts';
import type { TurnQueue } from '../../src/runtime/turn-queue.ts';
import type { ClusterStatus } from '../../src/gateway/server.ts';
import type { TurnParts } from './turns.ts';

/** How often a node reports itself (and the status shows a node gone after three missed reports). */
const REPORT_MS = NODE_REPORT_MS;

export interface ClusterParts {
  readonly node: string;
  readonly database: Database;
  /** The runtime's turn queue (pg-boss) and reply route (the node holding a channel sends its replies). */
  readonly turns: TurnParts;
  /** The other nodes' remote tools, and routing calls to them (src/tools/remote-peers.ts). */
  readonly remoteTools: RemoteToolBridge;
  /** This node and the cluster's nodes as last read (for status). */
  status(): ClusterStatus;
  /** Starts competing for the channels and reporting; call after runtime.start(). */
  join(runtime: Runtime, channels: readonly Channel[]): Promise<void>;
  /**
   * What a config reload changes channels through in a cluster: an added channel is competed
   * for (and started here only if this node takes its lease), a replaced one is swapped in
   * where it runs (or when its lease is next taken), a removed one is stopped and its lease
   * released, so another node that still has it configured takes it over.
   */
  reloadable(runtime: Runtime): ReloadableChannels;
  /** Leaves the cluster: after runtime.stop(). */
  leave(): Promise<void>;
}

export async function openCluster(config: Config, log: Logger, concurrency: number): Promise<ClusterParts> {
  const url = config.store.url!;
  const node = config.cluster.node ?? hostname();
  const clusterLog = log.child({ node });
  const failover = config.cluster.failover_seconds;
  // kept open: one per turn slot (its commit), the turn fetch and the reads shared by a tick
  const database = await openPostgres({ url, log: clusterLog, maxConnections: config.store.max_connections, keepOpen: concurrency + 2 });
  let queue: TurnQueue;
  try {
    queue = await createPgBossQueue({
      url,
      log: clusterLog,
      concurrency,
      heartbeatSeconds: Math.max(10, failover),
      turnTimeoutSeconds: config.agent.turn_timeout_seconds,
      database,
    });
  } catch (error) {
    await database.close();
    throw storeUnavailable(redactUrl(url), error);
  }
  const registry = new NodeRegistry(database, REPORT_MS);
  let remoteTools: RemoteToolBridge;
  try {
    // a node is gone (and its clients' tools with it) after three missed reports, as in the status
    remoteTools = await startRemoteToolBridge({ url, database, node, log: clusterLog, aliveMs: 3 * REPORT_MS });
  } catch (error) {
    await database.close();
    throw error;
  }
  let known: readonly ClusterNode[] = [];
  let leases: Leases | undefined;
  let listener: ReplyListener | undefined;
  /** The channels this node has configured, and which of them run here (this node holds their lease). */
  const configured = new Map<string, Channel>();
  const running = new Set<string>();
  const startHere = async (runtime: Runtime, name: string): Promise<void> => {
    const channel = configured.get(name);
    if (!channel || running.has(name)) return;
    running.add(name);
    await runtime.addChannel(channel);
  };
  const stopHere = async (runtime: Runtime, name: string): Promise<void> => {
    if (running.delete(name)) await runtime.removeChannel(name);
  };
  let reporting: NodeJS.Timeout | undefined;
  const startedAt = Date.now();

  return {
    node,
    database,
    turns: { queue, replies: clusterReplies((channel) => running.has(channel)) },
    remoteTools,
    status: () => ({ node, nodes: known }),
    async join(runtime, channels) {
      const version = packageVersion() ?? 'unknown';
      for (const channel of channels) if (!configured.has(channel.name)) configured.set(channel.name, channel);
      listener = await listenForReplies(url, clusterLog, {
        onReply: (conversation) => runtime.deliverRecorded(conversation),
        onReconnect: () => runtime.deliverAllHeld(),
      });
      leases = await startLeases(
        [...configured.keys()],
        // a lease is tried every third of the failover time; a vanished host's connection is dropped within it
        { url, log: clusterLog, retryMs: Math.max(500, Math.floor((failover * 1000) / 3)), keepaliveSeconds: failover },
        {
          onAcquired: (name) => startHere(runtime, name),
          onLost: (name) => stopHere(runtime, name),
        },
      );
      const report = async (): Promise<void> => {
        try {
          const health = runtime.health();
          await registry.report({ node, version, startedAt, channels: [...(leases?.held() ?? [])].sort(), inFlight: health.inFlight, turns: health.counters.answered + health.counters.failed });
          known = await registry.list();
        } catch (error) {
          clusterLog.warn({ err: error }, 'could not report this node to the cluster; trying again');
        }
      };
      await report();
      reporting = setInterval(() => void report(), REPORT_MS);
      reporting.unref();
      clusterLog.info({ channels: [...configured.keys()] }, 'joined the cluster; competing for the channels');
    },
    reloadable(runtime) {
      return {
        async addChannel(channel) {
          configured.set(channel.name, channel);
          leases?.add(channel.name);
        },
        async replaceChannel(channel) {
          configured.set(channel.name, channel);
          if (running.has(channel.name)) await runtime.replaceChannel(channel);
        },
        async removeChannel(name) {
          configured.delete(name);
          await stopHere(runtime, name);
          await leases?.remove(name);
          await stopHere(runtime, name); // taken while it was being removed
        },
      };
    },
    async leave() {
      clearInterval(reporting);
      await leases?.stop();
      await listener?.stop();
      await remoteTools.close();
      await registry.leave(node).catch((error: unknown) => clusterLog.warn({ err: error }, 'could not mark this node as gone'));
      await database.close();
    },
  };
}
