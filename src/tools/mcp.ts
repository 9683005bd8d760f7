/**
 * MCP servers (`[[mcp.servers]]`) as tools, with the official SDK: a stdio server (a command
 * we start) or a streamable-HTTP one (a URL). Each server's tools are offered to the model as
 * `<server>__<tool>` and run under the same policy and approvals as built-ins. A stdio server
 * that exits is started again with backoff; while it is down its tools are not offered, and a
 * call that was in flight fails as an error result. The SDK is loaded only when a server is
 * configured.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { backoffDelay, sleep, type BackoffOptions } from '../backoff.ts';
import { ok, toolError, type Tool, type ToolResult } from '../tool.ts';
import { createSchemaInterner, toolNamePattern, type ToolSource } from './sources.ts';

/** One `[[mcp.servers]]` entry: exactly one of `command` and `url`. */
export interface McpServerSpec {
  /** Short name: the tools' prefix and the `mcp:<name>` source. */
  readonly name: string;
  /** stdio: the program to start, with `args`, `env` (added to a minimal PATH/HOME/USER environment) and `cwd`. */
  readonly command?: string;
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
  /** Streamable HTTP: the endpoint, with extra request `headers` (e.g. Authorization). */
  readonly url?: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** Per call, and for connecting. @default 60000 */
  readonly timeoutMs?: number;
}

export interface McpToolsOptions {
  readonly servers: readonly McpServerSpec[];
  readonly log: Logger;
  /** Delay before reconnecting a server that failed or exited. @default { initialMs: 1000, maxMs: 60000 } */
  readonly restart?: BackoffOptions;
  /** A connection that lasted this long resets the backoff. @default 30000 */
  readonly healthyAfterMs?: number;
}

export interface McpServerStatus {
  readonly server: string;
  readonly state: 'connecting' | 'ready' | 'down';
  readonly tools: number;
  readonly restarts: number;
  readonly lastError?: string;
}

export interface McpTools extends ToolSource {
  /** Connects every server. Resolves once each has connected or failed its first attempt (a broken server does not hold start-up; it keeps retrying). */
  start(): Promise<void>;
  status(): McpServerStatus[];
  /** Disconnects every server (stops stdio ones) and stops reconnecting. */
  close(): Promise<void>;
}

type CallResult = Awaited<ReturnType<Client['callTool']>>;
type ListedTool = Awaited<ReturnType<Client['listTools']>>['tools'][number];

interface ServerState {
  readonly spec: McpServerSpec;
  readonly log: Logger;
  client: Client | undefined;
  tools: readonly Tool[];
  state: McpServerStatus['state'];
  restarts: number;
  lastError?: string;
}

export function createMcpTools(options: McpToolsOptions): McpTools {
  const restart = options.restart ?? { initialMs: 1000, maxMs: 60_000 };
  const healthyAfterMs = options.healthyAfterMs ?? 30_000;
  const stop = new AbortController();
  const servers = options.servers.map(
    (spec): ServerState => ({ spec, log: options.log.child({ component: 'mcp', mcpServer: spec.name }), client: undefined, tools: [], state: 'connecting', restarts: 0 }),
  );
  const serverOf = new WeakMap<Tool, ServerState>();
  const intern = createSchemaInterner();
  let snapshot: readonly Tool[] | undefined;
  let loops: Array<Promise<void>> = [];

  const setTools = (server: ServerState, tools: readonly Tool[]): void => {
    server.tools = tools;
    for (const tool of tools) serverOf.set(tool, server);
    snapshot = undefined;
  };

  /** Keeps one server connected until close(): connect, list, wait for the connection to end, back off, again. */
  async function keepConnected(server: ServerState, firstAttempt: () => void): Promise<void> {
    let attempt = 0;
    while (!stop.signal.aborted) {
      let connectedAt: number | undefined; // monotonic
      try {
        server.state = 'connecting';
        const { client, closed } = await connect(server.spec, server.log);
        server.client = client;
        if (stop.signal.aborted) return; // close() shuts it once the loops have ended
        try {
          setTools(server, await listTools(server, client));
        } catch (error) {
          await client.close().catch(() => undefined);
          throw error;
        }
        server.state = 'ready';
        connectedAt = performance.now();
        server.log.info({ tools: server.tools.map((tool) => tool.name) }, 'MCP server connected');
        firstAttempt();
        if (!stop.signal.aborted) await closed;
        if (stop.signal.aborted) return;
        server.log.warn('MCP server connection ended; reconnecting');
      } catch (error) {
        if (stop.signal.aborted) return;
        server.lastError = error instanceof Error ? error.message : String(error);
        server.log.warn({ err: error }, 'MCP server unavailable; retrying');
        firstAttempt();
      }
      server.client = undefined;
      server.state = 'down';
      setTools(server, []);
      if (connectedAt !== undefined && performance.now() - connectedAt >= healthyAfterMs) attempt = 0;
      server.restarts++;
      try {
        await sleep(backoffDelay(attempt++, restart), stop.signal);
      } catch {
        return;
      }
    }
  }

  async function listTools(server: ServerState, client: Client): Promise<Tool[]> {
    const listed: ListedTool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: server.spec.timeoutMs ?? 60_000 });
      listed.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined && listed.length < 1000);
    const taken = new Set<string>();
    return listed.map((tool) => {
      const name = exposedName(server.spec.name, tool.name, taken);
      taken.add(name);
      return mcpTool(server, tool, name);
    });
  }

  function mcpTool(server: ServerState, listed: ListedTool, name: string): Tool {
    const timeoutMs = server.spec.timeoutMs ?? 60_000;
    const readOnly = listed.annotations?.readOnlyHint === true;
    // `$schema` (often draft 2020-12) would make our validator look up a meta-schema it does not load.
    const { $schema: _ignored, ...parameters } = listed.inputSchema as Record<string, unknown>;
    return {
      name,
      description: listed.description ?? listed.title ?? `${listed.name} (MCP server ${server.spec.name})`,
      parameters: intern(parameters),
      timeoutMs: timeoutMs + 5_000,
      // An MCP server can do anything; only a tool its server marks read-only counts as safe.
      // Otherwise a call is a medium-risk change: supervised autonomy asks, read-only refuses.
      assess: (args) => ({ risk: readOnly ? 'low' : 'medium', mutates: !readOnly, summary: `${name}: ${JSON.stringify(args).slice(0, 200)}` }),
      async execute(args, ctx) {
        const client = server.client;
        if (!client || server.state !== 'ready') return toolError(`The MCP server "${server.spec.name}" is not connected right now (it is restarting); try again shortly.`);
        try {
          return mapResult(await client.callTool({ name: listed.name, arguments: args }, undefined, { signal: ctx.signal, timeout: timeoutMs }));
        } catch (error) {
          if (ctx.signal.aborted) throw error;
          return toolError(`${name} failed: ${error instanceof Error ? error.message : String(error)}`);
        }
      },
    };
  }

  return {
    async start() {
      const firsts = servers.map((server) => {
        let resolve = (): void => undefined;
        const first = new Promise<void>((done) => (resolve = done));
        loops.push(keepConnected(server, resolve));
        return first;
      });
      await Promise.all(firsts);
    },
    tools() {
      snapshot ??= servers.flatMap((server) => server.tools);
      return snapshot;
    },
    origin(tool) {
      const server = serverOf.get(tool);
      return server && server.tools.includes(tool) ? `mcp:${server.spec.name}` : undefined;
    },
    status() {
      return servers.map((server) => ({
        server: server.spec.name,
        state: server.state,
        tools: server.tools.length,
        restarts: server.restarts,
        ...(server.lastError === undefined ? {} : { lastError: server.lastError }),
      }));
    },
    async close() {
      stop.abort();
      const closeAll = (): Promise<unknown> =>
        Promise.all(
          servers.map((server) => {
            const client = server.client;
            server.client = undefined;
            return client?.close().catch((error: unknown) => server.log.warn({ err: error }, 'closing MCP server failed'));
          }),
        );
      await closeAll(); // ends the loops waiting on a live connection
      await Promise.all(loops);
      await closeAll(); // a connection that completed while we were stopping
      loops = [];
      for (const server of servers) setTools(server, []);
    },
  };
}

/** Opens one connection; `closed` resolves when it ends (a stdio server exiting, or our close). */
async function connect(spec: McpServerSpec, log: Logger): Promise<{ client: Client; closed: Promise<void> }> {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const client = new Client({ name: 'switchboard', version: '0.1.0' });
  const closed = new Promise<void>((resolve) => (client.onclose = resolve));
  client.onerror = (error) => log.warn({ err: error }, 'MCP transport error');
  const timeout = spec.timeoutMs ?? 60_000;
  if (spec.url !== undefined) {
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    await client.connect(new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers: { ...spec.headers } } }), { timeout });
  } else if (spec.command !== undefined) {
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const transport = new StdioClientTransport({
      command: spec.command,
      args: [...(spec.args ?? [])],
      // The SDK adds this to a minimal environment (PATH, HOME, USER…): our secrets are not passed on.
      env: { ...spec.env },
      ...(spec.cwd === undefined ? {} : { cwd: spec.cwd }),
      stderr: 'pipe',
    });
    // The server's stderr is its log: keep it in ours, line by line, instead of on our stdout.
    let partial = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop()!.slice(-4096);
      for (const line of lines) if (line.trim() !== '') log.info({ stderr: line.slice(0, 2000) }, 'MCP server stderr');
    });
    await client.connect(transport, { timeout });
  } else {
    throw new Error(`MCP server "${spec.name}" needs a command or a url`);
  }
  return { client, closed };
}

/** `<server>__<tool>`, reduced to the characters every provider accepts, unique within the server. */
export function exposedName(server: string, tool: string, taken: ReadonlySet<string> = new Set()): string {
  let name = `${server}__${tool}`.replace(/[^A-Za-z0-9_-]/g, '_');
  if (!/^[A-Za-z_]/.test(name)) name = `_${name}`;
  if (name.length > 64 || taken.has(name)) {
    const hash = createHash('sha256').update(`${server}\0${tool}`).digest('hex').slice(0, 8);
    name = `${name.slice(0, 55)}_${hash}`;
  }
  if (!toolNamePattern.test(name)) throw new Error(`cannot name MCP tool ${tool}`);
  return name;
}

/**
 * Text content becomes the model's text; `isError` makes it an error result. The SDK has
 * checked the result against CallToolResultSchema; parts are still read defensively (a
 * server's extra fields pass that check), so nothing here throws.
 */
export function mapResult(result: CallResult): ToolResult {
  const record: Record<string, unknown> = typeof result === 'object' && result !== null ? (result as Record<string, unknown>) : { toolResult: result };
  if (!Array.isArray(record.content)) {
    return ok(JSON.stringify('toolResult' in record ? record.toolResult : record) ?? '');
  }
  const parts = (record.content as unknown[]).map((raw) => {
    const part = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>) : {};
    const resource = typeof part.resource === 'object' && part.resource !== null ? (part.resource as Record<string, unknown>) : {};
    switch (part.type) {
      case 'text':
        return typeof part.text === 'string' ? part.text : '';
      case 'resource':
        return typeof resource.text === 'string' ? resource.text : `[resource ${typeof resource.uri === 'string' ? resource.uri : '?'}]`;
      case 'resource_link':
        return `[resource ${typeof part.uri === 'string' ? part.uri : '?'}]`;
      default:
        return `[${typeof part.type === 'string' ? part.type : 'unknown'} content omitted]`;
    }
  });
  let text = parts.join('\n');
  if (text === '' && record.structuredContent !== undefined) text = JSON.stringify(record.structuredContent) ?? '';
  if (record.isError === true) return toolError(text || 'the MCP tool reported an error without a message');
  return ok(text);
}
