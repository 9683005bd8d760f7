/**
 * Remote tools across the cluster, through PostgreSQL (RemoteToolPeers, src/tools/remote-peers.ts).
 *
 * - Registry: each node writes its clients' tools to `remote_tools` (node, client, name, schema).
 *   A node lists the other nodes' rows joined with `cluster_nodes`, so a node that stopped
 *   reporting (dead) stops counting within `aliveMs`; a node clears its own rows when it starts
 *   (left by a crash) and when it leaves.
 * - Calls: the caller stores the call (id, target node, client, name, args) in
 *   `remote_tool_calls` and NOTIFYs the target with the id only (payloads are limited to 8000
 *   bytes); the target claims the row, runs it through its client, stores the result and NOTIFYs
 *   the caller, who reads and deletes the row. A caller that gives up deletes the row too (and
 *   tells the target when its turn was cancelled); the target never runs a call past the
 *   caller's deadline; rows whose caller died are swept a minute after their deadline.
 * - Notices missed while the LISTEN connection was down are made up for by a periodic pass
 *   (unclaimed calls for this node, answered calls of this node) and on reconnect.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Database } from '../store/sql.ts';
import { listen } from './listen.ts';
import type { ToolResult } from '../tool.ts';
import { remoteToolMessages, type PeerCallOutcome, type PeerTool, type RemoteToolPeers, type RemoteToolSpec, type RoutedCall } from '../tools/remote-peers.ts';

const CHANNEL = 'switchboard_remote_tools';
/** Rows of a node not seen for this long are deleted (it is listed as gone long before). */
const FORGET_NODE_MS = 10 * 60_000;
/** A call row outlives its deadline by this much before any node sweeps it (clocks differ a little). */
const SWEEP_GRACE_MS = 60_000;
/** How often a node sweeps those (every node does; each sweep is one indexed statement). */
const SWEEP_EVERY_MS = 30_000;

export interface RemoteToolBridgeOptions {
  /** The database, for the LISTEN connection of this bridge's own. */
  readonly url: string;
  readonly database: Database;
  readonly node: string;
  readonly log: Logger;
  /** A node whose last report (`cluster_nodes.seen_at`) is older than this is dead: its tools are not listed. */
  readonly aliveMs: number;
  /** How often the other nodes' tools are read again besides on notice, and missed notices made up for. @default 2000 */
  readonly refreshMs?: number;
  /** Pause before the LISTEN connection is opened again. @default 2000 */
  readonly retryMs?: number;
}

export interface RemoteToolBridge extends RemoteToolPeers {
  /** Reads the other nodes' tools now (otherwise on notice and every `refreshMs`). */
  refresh(): Promise<void>;
  /** Calls this node waits on, and calls it runs for others (status, tests). */
  inFlight(): { readonly waiting: number; readonly serving: number };
  /** Leaves: this node's tools and the calls for it are removed; calls it waits on end as disconnected. */
  close(): Promise<void>;
}

type Notice = { readonly k: 'call' | 'result' | 'cancel'; readonly to: string; readonly id: string } | { readonly k: 'tools'; readonly from: string };

interface Waiting {
  readonly node: string;
  readonly client: string;
  finish(outcome: PeerCallOutcome): void;
}

const isResult = (value: unknown): value is ToolResult => {
  if (typeof value !== 'object' || value === null) return false;
  const result = value as Record<string, unknown>;
  return (result.kind === 'ok' && typeof result.text === 'string') || (result.kind === 'error' && typeof result.message === 'string') || result.kind === 'effect';
};

/** Opens the bridge: clears this node's leftovers, listens for notices, and starts the periodic pass. */
export async function startRemoteToolBridge(options: RemoteToolBridgeOptions): Promise<RemoteToolBridge> {
  const { database: db, node } = options;
  const log = options.log.child({ component: 'remote-tools-cluster' });
  const refreshMs = options.refreshMs ?? 2000;
  const retryMs = options.retryMs ?? 2000;

  let peers: readonly PeerTool[] = [];
  let peersKey = '[]';
  const waiting = new Map<string, Waiting>();
  const serving = new Map<string, AbortController>();
  /** Client → the tools to write (the latest wins); removed once written. */
  const unpublished = new Map<string, readonly RemoteToolSpec[]>();
  /** Attached handlers, the one that answers last. */
  const handlers: Array<(call: RoutedCall, signal: AbortSignal) => Promise<ToolResult>> = [];
  let flushing: Promise<void> | undefined;
  let refreshing: Promise<void> | undefined;
  let refreshAgain = false;
  let ticking = false;
  let sweptAt = 0;
  let closed = false;

  const notice = (payload: Notice): string => JSON.stringify(payload);

  // A crash leaves this node's rows: its clients are gone, and so are the calls it was running.
  await db.run('DELETE FROM remote_tools WHERE node = ?', [node]);
  await db.run('DELETE FROM remote_tool_calls WHERE (node = ? AND result IS NULL) OR caller = ?', [node, node]);

  function onNotice(text: string): void {
    let payload: Notice;
    try {
      payload = JSON.parse(text) as Notice;
    } catch {
      return;
    }
    if (payload.k === 'tools') {
      if (payload.from !== node) refreshSoon();
    } else if (payload.to === node) {
      if (payload.k === 'call') void serve(payload.id);
      else if (payload.k === 'cancel') serving.get(payload.id)?.abort();
      else void collect(payload.id);
    }
  }

  /** Runs a call routed to this node, once (the row is claimed), and answers it. */
  async function serve(id: string): Promise<void> {
    if (closed) return;
    let row: { client: string; name: string; args: string; deadline: number } | undefined;
    try {
      row = await db.get('UPDATE remote_tool_calls SET taken_at = ? WHERE id = ? AND node = ? AND taken_at IS NULL RETURNING client, name, args, deadline', [Date.now(), id, node]);
    } catch (error) {
      log.warn({ err: error, callId: id }, 'could not take a routed remote-tool call; the periodic pass tries again');
      return;
    }
    if (!row) return;
    const controller = new AbortController();
    serving.set(id, controller);
    // Never run longer than the caller waits.
    const timer = setTimeout(() => controller.abort(), Math.max(0, row.deadline - Date.now()));
    let result: ToolResult;
    try {
      const args = JSON.parse(row.args) as Record<string, unknown>;
      const handler = handlers.at(-1);
      result = handler ? await handler({ client: row.client, name: row.name, args }, controller.signal) : remoteToolMessages(row.name, row.client).gone();
    } catch (error) {
      log.error({ err: error, callId: id, tool: row.name }, 'a routed remote-tool call failed');
      result = { kind: 'error', message: `${row.name} failed on node "${node}".` };
    } finally {
      clearTimeout(timer);
      serving.delete(id);
    }
    if (closed) return; // its row is deleted with this node's others
    try {
      // The notice goes with the answer's commit; a caller that gave up deleted the row, and gets none.
      await db.get(
        `WITH answered AS (UPDATE remote_tool_calls SET result = ? WHERE id = ? RETURNING caller)
         SELECT pg_notify(?, json_build_object('k', 'result', 'to', caller, 'id', ?::text)::text) FROM answered`,
        [JSON.stringify(result), id, CHANNEL, id],
      );
    } catch (error) {
      log.warn({ err: error, callId: id, tool: row.name }, 'could not store the answer of a routed remote-tool call; its caller will time out');
    }
  }

  /** Takes the answer of a call this node waits on (and deletes its row). */
  async function collect(id: string): Promise<void> {
    const entry = waiting.get(id);
    if (!entry) return;
    try {
      const row = await db.get<{ result: string }>('DELETE FROM remote_tool_calls WHERE id = ? AND result IS NOT NULL RETURNING result', [id]);
      if (!row) return;
      const result: unknown = JSON.parse(row.result);
      entry.finish(isResult(result) ? { kind: 'answered', result } : { kind: 'disconnected' });
    } catch (error) {
      log.warn({ err: error, callId: id }, 'could not read the answer of a routed remote-tool call; the periodic pass tries again');
    }
  }

  async function refresh(): Promise<void> {
    const rows = await db.all<{ node: string; client: string; name: string; description: string; parameters: string }>(
      `SELECT t.node, t.client, t.name, t.description, t.parameters FROM remote_tools t JOIN cluster_nodes n ON n.node = t.node
       WHERE t.node <> ? AND n.seen_at >= ? ORDER BY t.node, t.client, t.name`,
      [node, Date.now() - options.aliveMs],
    );
    const key = JSON.stringify(rows);
    if (key !== peersKey) {
      peersKey = key;
      peers = rows.map((row) => ({ ...row, parameters: JSON.parse(row.parameters) as Record<string, unknown> }));
    }
    // A call to a client no longer listed will not be answered: its node died or it left.
    const present = new Set(peers.map((peer) => `${peer.node}\0${peer.client}`));
    for (const entry of [...waiting.values()]) if (!present.has(`${entry.node}\0${entry.client}`)) entry.finish({ kind: 'disconnected' });
  }

  function refreshSoon(): void {
    if (closed) return;
    if (refreshing) {
      refreshAgain = true;
      return;
    }
    refreshing = (async () => {
      do {
        refreshAgain = false;
        await refresh().catch((error: unknown) => log.warn({ err: error }, 'could not read the cluster\'s remote tools; trying again'));
      } while (refreshAgain && !closed);
      refreshing = undefined;
    })();
  }

  /** Writes what `publish` was given, in order; what fails is written at the next pass. */
  function flush(): Promise<void> {
    flushing ??= (async () => {
      try {
        while (unpublished.size > 0 && !closed) {
          const [client, tools] = unpublished.entries().next().value!;
          await db.transaction(async (tx) => {
            await tx.run('DELETE FROM remote_tools WHERE node = ? AND client = ?', [node, client]);
            const now = Date.now();
            for (const tool of tools) {
              await tx.run('INSERT INTO remote_tools (node, client, name, description, parameters, registered_at) VALUES (?, ?, ?, ?, ?, ?)', [
                node,
                client,
                tool.name,
                tool.description,
                JSON.stringify(tool.parameters),
                now,
              ]);
            }
            await tx.get('SELECT pg_notify(?, ?)', [CHANNEL, notice({ k: 'tools', from: node })]);
          });
          // Published again meanwhile: write the newer list next.
          if (unpublished.get(client) === tools) unpublished.delete(client);
        }
      } catch (error) {
        log.warn({ err: error }, 'could not share this node\'s remote tools with the cluster; trying again');
      } finally {
        flushing = undefined;
      }
    })();
    return flushing;
  }

  /** The periodic pass: re-read the registry, make up for missed notices, sweep what callers left. */
  async function tick(): Promise<void> {
    if (ticking || closed) return;
    ticking = true;
    try {
      if (unpublished.size > 0) await flush();
      refreshSoon();
      const now = Date.now();
      const missed = await db.all<{ id: string }>('SELECT id FROM remote_tool_calls WHERE node = ? AND taken_at IS NULL AND created_at < ?', [node, now - refreshMs]);
      for (const { id } of missed) void serve(id);
      if (waiting.size > 0) {
        const answered = await db.all<{ id: string }>('SELECT id FROM remote_tool_calls WHERE caller = ? AND result IS NOT NULL', [node]);
        for (const { id } of answered) void collect(id);
      }
      if (now - sweptAt >= SWEEP_EVERY_MS) {
        sweptAt = now;
        await db.run('DELETE FROM remote_tool_calls WHERE deadline < ?', [now - SWEEP_GRACE_MS]);
        await db.run('DELETE FROM remote_tools WHERE registered_at < ? AND node NOT IN (SELECT node FROM cluster_nodes WHERE seen_at >= ?)', [now - FORGET_NODE_MS, now - FORGET_NODE_MS]);
      }
    } catch (error) {
      log.warn({ err: error }, 'the remote-tool pass failed; trying again');
    } finally {
      ticking = false;
    }
  }

  const listener = await listen({
    url: options.url,
    channel: CHANNEL,
    log,
    what: 'remote-tool listener',
    retryMs,
    onNotice,
    // whatever was announced while no one listened
    onReconnect: () => {
      refreshSoon();
      void tick();
    },
  });
  await refresh();
  const timer = setInterval(() => void tick(), refreshMs);
  timer.unref();

  return {
    node,
    publish(client, tools) {
      if (closed) return;
      unpublished.set(client, tools);
      void flush();
    },
    tools: () => peers,
    call(tool, args, { timeoutMs, signal }) {
      if (closed) return Promise.resolve({ kind: 'disconnected' });
      if (signal.aborted) return Promise.resolve({ kind: 'cancelled' });
      const id = randomUUID();
      const started = Date.now();
      return new Promise<PeerCallOutcome>((resolve) => {
        let done = false;
        /** The call's row being written: an abandoned call is deleted after it (a delete that overtook a slow insert would leave the row behind). */
        let stored: Promise<unknown> = Promise.resolve();
        const finish = (outcome: PeerCallOutcome): void => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          waiting.delete(id);
          if (outcome.kind !== 'answered') {
            log.info({ callId: id, tool: tool.name, node: tool.node, outcome: outcome.kind }, 'routed remote-tool call ended without an answer');
            stored.then(() => db.run('DELETE FROM remote_tool_calls WHERE id = ?', [id])).catch((error: unknown) => log.warn({ err: error, callId: id }, 'could not delete an abandoned remote-tool call; the sweep will'));
            // A cancelled turn: the client's node stops waiting for it too (at a timeout it stops by itself).
            if (outcome.kind === 'cancelled') {
              db.get('SELECT pg_notify(?, ?)', [CHANNEL, notice({ k: 'cancel', to: tool.node, id })]).catch((error: unknown) => log.warn({ err: error, callId: id }, 'could not tell the node of a cancelled remote-tool call'));
            }
          }
          resolve(outcome);
        };
        const timer = setTimeout(() => finish({ kind: 'timeout' }), timeoutMs);
        const onAbort = (): void => finish({ kind: 'cancelled' });
        signal.addEventListener('abort', onAbort, { once: true });
        waiting.set(id, { node: tool.node, client: tool.client, finish });
        stored = db.get(
          `WITH stored AS (INSERT INTO remote_tool_calls (id, caller, node, client, name, args, created_at, deadline) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING node)
           SELECT pg_notify(?, json_build_object('k', 'call', 'to', node, 'id', ?::text)::text) FROM stored`,
          [id, node, tool.node, tool.client, tool.name, JSON.stringify(args), started, started + timeoutMs, CHANNEL, id],
        ).catch((error: unknown) => {
          log.warn({ err: error, tool: tool.name, node: tool.node }, 'could not route a remote-tool call to its node');
          finish({ kind: 'disconnected' });
        });
      });
    },
    serve(next) {
      handlers.push(next);
      return () => {
        const at = handlers.indexOf(next);
        if (at >= 0) handlers.splice(at, 1);
      };
    },
    refresh,
    inFlight: () => ({ waiting: waiting.size, serving: serving.size }),
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      await flushing;
      await refreshing;
      for (const entry of [...waiting.values()]) entry.finish({ kind: 'disconnected' });
      for (const controller of serving.values()) controller.abort();
      await listener.stop();
      try {
        await db.run('DELETE FROM remote_tools WHERE node = ?', [node]);
        await db.run('DELETE FROM remote_tool_calls WHERE node = ? AND result IS NULL', [node]);
        await db.get('SELECT pg_notify(?, ?)', [CHANNEL, notice({ k: 'tools', from: node })]);
      } catch (error) {
        log.warn({ err: error }, 'could not remove this node\'s remote tools; the other nodes stop listing them when it is seen gone');
      }
    },
  };
}
