/**
 * Remote tools across a cluster: a client connects to one node's `/ws/tools`, but a turn may run
 * on any node. `RemoteToolPeers` is what the remote tools need from the other nodes — share this
 * node's clients' tools, see theirs, route a call to the node whose client owns the tool and
 * answer the calls routed here — without knowing how (src/cluster/remote-tools.ts does it with
 * PostgreSQL). On one node there are no peers and nothing here is used.
 *
 * `createPeerTools` turns the other nodes' tools into ordinary Tools (a ToolSource), so a turn
 * sees the union of the cluster's remote tools; a local client's tool of the same name wins.
 */
import { toolError, type Tool, type ToolResult } from '../tool.ts';
import { createSchemaInterner, type ToolSource } from './sources.ts';

/** What the model reads when a remote call does not complete: the same words on one node and across nodes. */
export function remoteToolMessages(name: string, client: string) {
  return {
    timedOut: (timeoutMs: number): ToolResult => toolError(`${name} timed out: the remote client "${client}" did not answer within ${timeoutMs / 1000} s.`),
    disconnectedInFlight: (): ToolResult => toolError(`The remote client "${client}" disconnected before answering; the call did not complete.`),
    gone: (): ToolResult => toolError(`The remote client "${client}" has disconnected; ${name} is no longer available.`),
    cancelled: (): ToolResult => toolError(`${name} was cancelled.`),
  };
}

/** A tool as a client registered it. */
export interface RemoteToolSpec {
  readonly name: string;
  readonly description: string;
  readonly parameters: Readonly<Record<string, unknown>>;
}

/** A tool a client of another node offers. */
export interface PeerTool extends RemoteToolSpec {
  readonly node: string;
  readonly client: string;
}

/** How a routed call ended (never a throw). */
export type PeerCallOutcome =
  | { readonly kind: 'answered'; readonly result: ToolResult }
  /** No answer within the timeout. */
  | { readonly kind: 'timeout' }
  /** The client (or its whole node) went away before answering. */
  | { readonly kind: 'disconnected' }
  | { readonly kind: 'cancelled' };

/** A call routed to this node, for one of its own clients. */
export interface RoutedCall {
  readonly client: string;
  readonly name: string;
  readonly args: Record<string, unknown>;
}

export interface RemoteToolPeers {
  /** This node's name. */
  readonly node: string;
  /** Replaces what this node's `client` offers (an empty list when it left). Never throws: failures are logged. */
  publish(client: string, tools: readonly RemoteToolSpec[]): void;
  /** The tools the clients of the other live nodes offer, as last read (the same array while unchanged). */
  tools(): readonly PeerTool[];
  /** Runs `tool` through its node's client. */
  call(tool: PeerTool, args: Record<string, unknown>, options: { readonly timeoutMs: number; readonly signal: AbortSignal }): Promise<PeerCallOutcome>;
  /**
   * Who answers calls routed to this node (the node's remote tools). The latest handler still
   * attached answers: a config reload attaches the new remote tools before it detaches the old
   * ones, and a reload that is discarded detaches its own. Returns the detach function.
   */
  serve(handler: (call: RoutedCall, signal: AbortSignal) => Promise<ToolResult>): () => void;
}

export interface PeerToolsOptions {
  /** How long the model waits for an answer. @default 30000 */
  readonly callTimeoutMs?: number;
}

/** The other nodes' remote tools as a ToolSource (origin `remote:<client>@<node>`). */
export function createPeerTools(peers: RemoteToolPeers, options: PeerToolsOptions = {}): ToolSource {
  const callTimeoutMs = options.callTimeoutMs ?? 30_000;
  const intern = createSchemaInterner();
  let input: readonly PeerTool[] | undefined;
  let output: readonly Tool[] = [];
  /** Identity of a peer tool → its Tool, kept while listed (a stable object per tool). */
  let built = new Map<string, Tool>();
  const origins = new WeakMap<Tool, string>();

  const toTool = (peer: PeerTool): Tool => {
    const say = remoteToolMessages(peer.name, peer.client);
    const tool: Tool = {
      name: peer.name,
      description: peer.description,
      parameters: intern(peer.parameters),
      timeoutMs: callTimeoutMs + 5_000,
      // The same judgement as a local client's tool (src/tools/remote.ts).
      assess: (args) => ({ risk: 'medium', mutates: true, summary: `remote ${peer.name}: ${JSON.stringify(args).slice(0, 200)}` }),
      execute: async (args, ctx) => {
        const outcome = await peers.call(peer, args, { timeoutMs: callTimeoutMs, signal: ctx.signal });
        switch (outcome.kind) {
          case 'answered':
            return outcome.result;
          case 'timeout':
            return say.timedOut(callTimeoutMs);
          case 'disconnected':
            return say.disconnectedInFlight();
          case 'cancelled':
            return say.cancelled();
        }
      },
    };
    origins.set(tool, `remote:${peer.client}@${peer.node}`);
    return tool;
  };

  return {
    tools() {
      const now = peers.tools();
      if (now === input) return output;
      const next = new Map<string, Tool>();
      const seen = new Set<string>();
      const list: Tool[] = [];
      for (const peer of now) {
        // Two nodes may briefly list one name (a client moving between nodes): the first wins.
        if (seen.has(peer.name)) continue;
        seen.add(peer.name);
        const key = JSON.stringify([peer.node, peer.client, peer.name, peer.description, peer.parameters]);
        const tool = built.get(key) ?? toTool(peer);
        next.set(key, tool);
        list.push(tool);
      }
      built = next;
      input = now;
      output = list;
      return output;
    },
    origin(tool) {
      return output.includes(tool) ? origins.get(tool) : undefined;
    },
  };
}
