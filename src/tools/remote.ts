/**
 * Remote tools (seed 004): a client connected to the gateway's `/ws/tools` WebSocket registers
 * tools, and the agent calls them like built-ins. The protocol, all JSON text frames:
 *
 *   client → {"type":"register_tools","tools":[{"name","description","parameters"}]}
 *   gateway → {"type":"tools_registered","count","registered","accepted":[…],"rejected":[{"name","reason"}]}
 *   gateway → {"type":"tool_call_request","id","name","args"}
 *   client → {"type":"tool_result","id","output","success":true} | {"type":"tool_error","id","error"}
 *   gateway → {"type":"result_acknowledged","id"}
 *   gateway → {"type":"error","error"[,"id"]}   (a frame it could not use; the connection stays open)
 *
 * A call the client does not answer in time becomes a timeout error for the model; a client
 * that disconnects takes its tools with it at once and its calls in flight fail the same way.
 * A client names itself with `?client=<name>` on the URL (shown as `remote:<name>`).
 *
 * In a cluster (`peers`), this node's clients' tools are shared with the other nodes, calls the
 * other nodes route here run through the local client, and a name another node's client holds
 * is refused like a name another local client holds (src/tools/remote-peers.ts).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { UpgradeRoute } from '../route.ts';
import { toolError, type Tool, type ToolResult } from '../tool.ts';
import { remoteToolMessages, type RemoteToolPeers } from './remote-peers.ts';
import { createSchemaInterner, toolNamePattern, type ToolSource } from './sources.ts';

export interface RemoteToolsOptions {
  readonly log: Logger;
  /** How long the model waits for a client's answer. @default 30000 */
  readonly callTimeoutMs?: number;
  /** Names clients may register; `*` matches any run of characters (e.g. "phone_*"). Omitted = any valid name. */
  readonly allow?: readonly string[];
  /** Names already taken (built-ins, MCP tools), asked at each registration. */
  readonly reserved?: () => Iterable<string>;
  /** @default 64 */
  readonly maxToolsPerClient?: number;
  /** Clients connected at once; one more is closed with code 1013 (try again later). @default 16 */
  readonly maxClients?: number;
  /** Larger frames close the connection (code 1009). @default 1048576 */
  readonly maxFrameBytes?: number;
  /** A client that misses a ping for this long is dropped. @default 30000 */
  readonly pingIntervalMs?: number;
  /** @default "/ws/tools" */
  readonly path?: string;
  /** The other nodes of a cluster; absent on a single node. */
  readonly peers?: RemoteToolPeers;
}

/** The registry of connected clients' tools; also the gateway's upgrade route. */
export interface RemoteTools extends ToolSource {
  /** `/ws/tools` with token auth, for `GatewayRoutes.addUpgrade`. */
  readonly route: UpgradeRoute;
  /** Connected clients, for status. */
  clients(): Array<{ readonly id: string; readonly tools: readonly string[]; readonly inFlight: number }>;
  /** Disconnects every client (their calls in flight fail) and refuses new ones. */
  close(): Promise<void>;
}

interface Client {
  readonly id: string;
  readonly socket: WebSocket;
  readonly log: Logger;
  /** Tool name → the Tool this client registered. */
  readonly tools: Map<string, Tool>;
  /** Call id → settles the call. */
  readonly pending: Map<string, (result: ToolResult) => void>;
  alive: boolean;
  closed: boolean;
}

type Frame = Record<string, unknown>;
const isRecord = (value: unknown): value is Frame => typeof value === 'object' && value !== null && !Array.isArray(value);
const maxDescription = 1024;

export function createRemoteTools(options: RemoteToolsOptions): RemoteTools {
  const log = options.log.child({ component: 'remote-tools' });
  const callTimeoutMs = options.callTimeoutMs ?? 30_000;
  const maxTools = options.maxToolsPerClient ?? 64;
  const maxClients = options.maxClients ?? 16;
  const allow = options.allow?.map((pattern) => new RegExp(`^${pattern.split('*').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`));
  const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxFrameBytes ?? 1024 * 1024 });
  const clients = new Map<string, Client>();
  /** Tool name → owning client, across all clients. */
  const owners = new Map<string, Client>();
  const clientOf = new WeakMap<Tool, Client>();
  const intern = createSchemaInterner();
  let snapshot: readonly Tool[] | undefined;
  let counter = 0;
  let closed = false;
  let pinger: ReturnType<typeof setInterval> | undefined;

  const send = (client: Client, frame: Frame): void => {
    if (client.closed || client.socket.readyState !== client.socket.OPEN) return;
    client.socket.send(JSON.stringify(frame), (error) => {
      if (error) client.log.warn({ err: error }, 'could not send a frame to the remote-tool client');
    });
  };
  const protocolError = (client: Client, error: string, id?: string): void => {
    client.log.warn({ problem: error }, 'bad frame from remote-tool client');
    send(client, { type: 'error', error, ...(id === undefined ? {} : { id }) });
  };

  function clientId(request: IncomingMessage): string {
    counter++;
    const asked = new URL(request.url ?? '/', 'http://gateway').searchParams.get('client');
    const base = asked !== null && /^[A-Za-z0-9_.-]{1,64}$/.test(asked) ? asked : `client-${counter}`;
    return clients.has(base) ? `${base}-${counter}` : base;
  }

  function connect(socket: WebSocket, request: IncomingMessage): void {
    if (clients.size >= maxClients) {
      // Each client holds tools, calls in flight and a socket: their number is bounded too.
      log.warn({ address: request.socket.remoteAddress, clients: clients.size }, `remote-tool client refused: ${maxClients} clients are connected already (gateway.remote_tools.max_clients)`);
      socket.close(1013, `at most ${maxClients} remote-tool clients may be connected; try again later`);
      return;
    }
    const id = clientId(request);
    const client: Client = { id, socket, log: log.child({ client: id }), tools: new Map(), pending: new Map(), alive: true, closed: false };
    clients.set(id, client);
    client.log.info({ address: request.socket.remoteAddress }, 'remote-tool client connected');
    socket.on('message', (data, isBinary) => {
      try {
        onFrame(client, data, isBinary);
      } catch (error) {
        // Never let one client's frame take the daemon down.
        client.log.error({ err: error }, 'remote-tool frame handling failed');
        protocolError(client, 'internal error handling this frame');
      }
    });
    socket.on('pong', () => (client.alive = true));
    socket.on('error', (error) => client.log.warn({ err: error }, 'remote-tool connection error'));
    socket.on('close', (code) => drop(client, `closed (${code})`));
    pinger ??= startPinger();
  }

  function startPinger(): ReturnType<typeof setInterval> {
    const timer = setInterval(() => {
      for (const client of clients.values()) {
        if (!client.alive) {
          client.log.warn('remote-tool client missed a ping; dropping it');
          client.socket.terminate();
          drop(client, 'missed ping');
          continue;
        }
        client.alive = false;
        client.socket.ping();
      }
    }, options.pingIntervalMs ?? 30_000);
    timer.unref();
    return timer;
  }

  /** Removes a client's tools at once and fails its calls in flight. Idempotent. */
  function drop(client: Client, why: string): void {
    if (client.closed) return;
    client.closed = true;
    clients.delete(client.id);
    for (const name of client.tools.keys()) if (owners.get(name) === client) owners.delete(name);
    snapshot = undefined;
    if (client.tools.size > 0) options.peers?.publish(client.id, []);
    const failed = [...client.pending.values()];
    client.pending.clear();
    for (const settle of failed) settle(remoteToolMessages('', client.id).disconnectedInFlight());
    client.log.info({ why, tools: client.tools.size, failedCalls: failed.length }, 'remote-tool client gone');
  }

  function onFrame(client: Client, data: RawData, isBinary: boolean): void {
    if (isBinary) return protocolError(client, 'binary frames are not part of the protocol; send JSON text frames');
    const text = Array.isArray(data) ? Buffer.concat(data).toString('utf8') : Buffer.from(data as ArrayBuffer).toString('utf8');
    let frame: unknown;
    try {
      frame = JSON.parse(text);
    } catch {
      return protocolError(client, 'a frame must be valid JSON');
    }
    if (!isRecord(frame) || typeof frame.type !== 'string') return protocolError(client, 'a frame must be a JSON object with a string "type"');
    switch (frame.type) {
      case 'register_tools':
        return register(client, frame);
      case 'tool_result':
      case 'tool_error':
        return answer(client, frame);
      default:
        return protocolError(client, `unknown frame type "${frame.type.slice(0, 64)}" (expected register_tools, tool_result or tool_error)`);
    }
  }

  function register(client: Client, frame: Frame): void {
    if (!Array.isArray(frame.tools)) return protocolError(client, 'register_tools needs a "tools" array');
    const reserved = new Set(options.reserved?.() ?? []);
    const accepted: string[] = [];
    const rejected: Array<{ name: string; reason: string }> = [];
    const seen = new Set<string>();
    for (const entry of frame.tools as unknown[]) {
      const name = isRecord(entry) && typeof entry.name === 'string' ? entry.name : '';
      const reason = problemWith(client, entry, name, reserved, seen);
      seen.add(name);
      if (reason) {
        rejected.push({ name: name.slice(0, 100), reason });
        continue;
      }
      const spec = entry as Frame;
      const tool = remoteTool(client, name, typeof spec.description === 'string' ? spec.description.slice(0, maxDescription) : '', (spec.parameters as Frame | undefined) ?? { type: 'object', properties: {} });
      client.tools.set(name, tool);
      clientOf.set(tool, client);
      owners.set(name, client);
      accepted.push(name);
    }
    if (accepted.length > 0) {
      snapshot = undefined;
      options.peers?.publish(client.id, [...client.tools.values()].map(({ name, description, parameters }) => ({ name, description, parameters })));
    }
    client.log.info({ accepted, rejected }, 'remote tools registered');
    send(client, { type: 'tools_registered', count: frame.tools.length, registered: accepted.length, accepted, rejected });
  }

  function problemWith(client: Client, entry: unknown, name: string, reserved: Set<string>, seen: Set<string>): string | undefined {
    if (!isRecord(entry)) return 'each tool must be an object with name, description and parameters';
    if (!toolNamePattern.test(name)) return 'the name must be 1–64 letters, digits, "_" or "-", starting with a letter or "_"';
    if (seen.has(name)) return 'the name appears twice in this registration';
    if (allow && !allow.some((pattern) => pattern.test(name))) return 'the name is not in the gateway\'s allowlist for remote tools';
    if (reserved.has(name)) return 'a built-in or MCP tool already has this name';
    const owner = owners.get(name);
    if (owner && owner !== client) return `another client ("${owner.id}") already registered this name`;
    // A client of the same id on another node is this one moving over: its old entry goes soon.
    const elsewhere = options.peers?.tools().find((tool) => tool.name === name && tool.client !== client.id);
    if (elsewhere) return `another client ("${elsewhere.client}" on node "${elsewhere.node}") already registered this name`;
    if (!client.tools.has(name) && client.tools.size >= maxTools) return `a client may register at most ${maxTools} tools`;
    if (entry.description !== undefined && typeof entry.description !== 'string') return 'the description must be a string';
    const parameters = entry.parameters;
    if (parameters !== undefined && (!isRecord(parameters) || (parameters.type !== undefined && parameters.type !== 'object'))) {
      return 'parameters must be a JSON Schema object with "type": "object"';
    }
    return undefined;
  }

  function answer(client: Client, frame: Frame): void {
    if (typeof frame.id !== 'string') return protocolError(client, `${String(frame.type)} needs the string "id" of the tool_call_request`);
    const settle = client.pending.get(frame.id);
    // A late answer (after the timeout) or a made-up id: nothing waits for it any more.
    if (!settle) return protocolError(client, 'no call with this id is waiting (it may have timed out)', frame.id);
    let result: ToolResult;
    if (frame.type === 'tool_error' || frame.success === false) {
      const message = typeof frame.error === 'string' ? frame.error : typeof frame.output === 'string' ? frame.output : 'the remote tool failed';
      result = toolError(message);
    } else {
      const output = frame.output;
      result = { kind: 'ok', text: typeof output === 'string' ? output : output === undefined ? '' : JSON.stringify(output) };
    }
    settle(result);
    send(client, { type: 'result_acknowledged', id: frame.id });
  }

  function remoteTool(client: Client, name: string, description: string, parameters: Frame): Tool {
    return {
      name,
      description,
      parameters: intern(parameters),
      // Our own timeout answers the model; the runner's is only a backstop a little later.
      timeoutMs: callTimeoutMs + 5_000,
      // We cannot see what a remote client does with a call (its device, its network, its files):
      // every call counts as a medium-risk change, so supervised autonomy asks the person first
      // and read-only autonomy refuses it — exactly as for a risky built-in.
      assess: (args) => ({ risk: 'medium', mutates: true, summary: `remote ${name}: ${JSON.stringify(args).slice(0, 200)}` }),
      execute: (args, ctx) => invoke(client, name, args, ctx.signal),
    };
  }

  /** Sends a call to the client and waits for its answer, the timeout, a disconnect or `signal`. */
  function invoke(client: Client, name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult> {
    const say = remoteToolMessages(name, client.id);
    if (client.closed) return Promise.resolve(say.gone());
    if (signal.aborted) return Promise.resolve(say.cancelled());
    const id = randomUUID();
    return new Promise<ToolResult>((resolve) => {
      const finish = (result: ToolResult): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        client.pending.delete(id);
        resolve(result);
      };
      const timer = setTimeout(() => {
        client.log.warn({ tool: name, callId: id }, 'remote tool call timed out');
        finish(say.timedOut(callTimeoutMs));
      }, callTimeoutMs);
      const onAbort = (): void => finish(say.cancelled());
      signal.addEventListener('abort', onAbort, { once: true });
      client.pending.set(id, finish);
      send(client, { type: 'tool_call_request', id, name, args });
    });
  }

  // Calls another node routed to one of our clients run as if a local turn made them.
  const detach = options.peers?.serve((call, signal) => {
    const client = clients.get(call.client);
    if (!client?.tools.has(call.name)) return Promise.resolve(remoteToolMessages(call.name, call.client).gone());
    return invoke(client, call.name, call.args, signal);
  });

  return {
    route: {
      path: options.path ?? '/ws/tools',
      auth: 'token',
      handle(request: IncomingMessage, socket: Duplex, head: Buffer) {
        if (closed) {
          socket.destroy();
          return;
        }
        wss.handleUpgrade(request, socket, head, (ws) => connect(ws, request));
      },
    },
    tools() {
      snapshot ??= [...owners.entries()].map(([name, client]) => client.tools.get(name)!);
      return snapshot;
    },
    origin(tool) {
      const client = clientOf.get(tool);
      return client && !client.closed && owners.get(tool.name) === client ? `remote:${client.id}` : undefined;
    },
    clients() {
      return [...clients.values()].map((client) => ({ id: client.id, tools: [...client.tools.keys()], inFlight: client.pending.size }));
    },
    async close() {
      closed = true;
      detach?.();
      if (pinger) clearInterval(pinger);
      const all = [...clients.values()];
      for (const client of all) {
        drop(client, 'gateway shutting down');
        client.socket.close(1001, 'shutting down');
      }
      // Give clients a moment to answer the close handshake, then cut whatever is left.
      await new Promise((resolve) => setTimeout(resolve, 200).unref());
      for (const client of all) client.socket.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
