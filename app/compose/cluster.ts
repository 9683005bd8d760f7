/**
 * Cluster mode (`[store] kind = "postgres"`), loaded only then: PostgreSQL for every store, the
 * pg-boss turn queue, a lease per channel, the reply wake-up, and this node's report every few
 * seconds. What the runtime sees is a Database and a TurnQueue; which node holds which channel is
 * decided here.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Channel } from '../../src/channel.ts';
import { NodeRegistry, type ClusterNode } from '../../src/cluster/nodes.ts';
import { createPgBossQueue } from '../../src/cluster/pg-boss-queue.ts';
import type { TurnQueue } from '../../src/cluster/queue.ts';
import { startLeases, type Leases } from '../../src/cluster/leases.ts';
import { announceReply, listenForReplies, type ReplyListener } from '../../src/cluster/replies.ts';
import type { Config } from '../../src/config/schema.ts';
import type { Runtime } from '../../src/runtime/runtime.ts';
import { openPostgres } from '../../src/store/postgres/sql.ts';
import type { Database } from '../../src/store/sql.ts';

/** How often a node reports itself (and the status shows a node gone after three missed reports). */
const REPORT_MS = 3000;

export interface ClusterParts {
  readonly node: string;
  readonly database: Database;
  readonly queue: TurnQueue;
  readonly onReplyRecorded: typeof announceReply;
  /** The cluster's nodes as last read (for status). */
  nodes(): readonly ClusterNode[];
  /** Starts competing for the channels and reporting; call after runtime.start(). */
  join(runtime: Runtime, channels: readonly Channel[]): Promise<void>;
  /** Leaves the cluster: after runtime.stop(). */
  leave(): Promise<void>;
}

export async function openCluster(config: Config, log: Logger, concurrency: number): Promise<ClusterParts> {
  const url = config.store.url!;
  const node = config.cluster.node ?? hostname();
  const clusterLog = log.child({ node });
  const failover = config.cluster.failover_seconds;
  const database = await openPostgres({ url, log: clusterLog, maxConnections: config.store.max_connections });
  let queue: TurnQueue;
  try {
    queue = await createPgBossQueue({
      url,
      log: clusterLog,
      concurrency,
      heartbeatSeconds: Math.max(10, failover),
      turnTimeoutSeconds: config.agent.turn_timeout_seconds,
    });
  } catch (error) {
    await database.close();
    throw error;
  }
  const registry = new NodeRegistry(database, REPORT_MS);
  let known: readonly ClusterNode[] = [];
  let leases: Leases | undefined;
  let listener: ReplyListener | undefined;
  let reporting: NodeJS.Timeout | undefined;
  const startedAt = Date.now();

  return {
    node,
    database,
    queue,
    onReplyRecorded: announceReply,
    nodes: () => known,
    async join(runtime, channels) {
      const version = packageVersion();
      const byName = new Map(channels.map((channel) => [channel.name, channel]));
      listener = await listenForReplies(url, clusterLog, {
        onReply: (conversation) => runtime.deliverRecorded(conversation),
        onReconnect: () => runtime.deliverAllHeld(),
      });
      leases = await startLeases(
        [...byName.keys()],
        // a lease is tried every third of the failover time; a vanished host's connection is dropped within it
        { url, log: clusterLog, retryMs: Math.max(500, Math.floor((failover * 1000) / 3)), keepaliveSeconds: failover },
        {
          onAcquired: (name) => runtime.addChannel(byName.get(name)!),
          onLost: (name) => runtime.removeChannel(name),
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
      clusterLog.info({ channels: [...byName.keys()] }, 'joined the cluster; competing for the channels');
    },
    async leave() {
      clearInterval(reporting);
      await leases?.stop();
      await listener?.stop();
      await registry.leave(node).catch((error: unknown) => clusterLog.warn({ err: error }, 'could not mark this node as gone'));
      await database.close();
    },
  };
}

/** This Switchboard's version (source tree or dist/ layout). */
function packageVersion(): string {
  for (const path of ['../../package.json', '../../../package.json']) {
    try {
      return (JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { version: string }).version;
    } catch {
      // the other layout
    }
  }
  return 'unknown';
}
