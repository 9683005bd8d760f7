/**
 * Where the agent's tools come from: the built-ins (fixed at start), MCP servers and remote
 * clients (which come and go). Each is a ToolSource; `combineSources` merges them into the one
 * list the tool runner reads at every turn, so a tool registered now is offered on the next
 * turn and a disconnected client's tools are gone from it, under the same policy as built-ins.
 */
import type { ServerResponse } from 'node:http';
import type { ToolList } from '../agent/tool-runner.ts';
import type { HttpRoute } from '../route.ts';
import type { Tool } from '../tool.ts';

/** A changing list of tools that also says where each one comes from. */
export interface ToolSource extends ToolList {
  /** "built-in", "mcp:<server>", "remote:<client>" — or undefined for a tool not from here. */
  origin(tool: Tool): string | undefined;
}

/**
 * Tool names every provider accepts (OpenAI and Anthropic: `[a-zA-Z0-9_-]{1,64}`; Gemini also
 * wants a letter or underscore first).
 */
export const toolNamePattern = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/**
 * Returns one object per distinct schema. The argument validator's Ajv caches every schema
 * object it compiles for the life of the process, so tools re-created on each reconnect (a
 * remote client, a restarted MCP server) would otherwise grow that cache without end.
 */
export function createSchemaInterner(max = 1000): (schema: Readonly<Record<string, unknown>>) => Readonly<Record<string, unknown>> {
  const seen = new Map<string, Readonly<Record<string, unknown>>>();
  return (schema) => {
    const key = JSON.stringify(schema);
    const known = seen.get(key);
    if (known) return known;
    if (seen.size < max) seen.set(key, schema);
    return schema;
  };
}

/** A fixed list, e.g. the built-ins. */
export function staticSource(tools: readonly Tool[], label = 'built-in'): ToolSource {
  const own = new Set(tools);
  return { tools: () => tools, origin: (tool) => (own.has(tool) ? label : undefined) };
}

/**
 * All sources as one list. On a name clash the earlier source wins (put the built-ins first):
 * a later tool of the same name is left out, so the model never sees two tools with one name.
 * Returns the same array while no source changed, as the runner expects.
 */
export function combineSources(sources: readonly ToolSource[]): ToolSource {
  let inputs: ReadonlyArray<readonly Tool[]> = [];
  let merged: readonly Tool[] = [];
  return {
    tools() {
      const lists = sources.map((source) => source.tools());
      if (lists.length === inputs.length && lists.every((list, i) => list === inputs[i])) return merged;
      const seen = new Set<string>();
      const next: Tool[] = [];
      for (const tool of lists.flat()) {
        if (seen.has(tool.name)) continue;
        seen.add(tool.name);
        next.push(tool);
      }
      inputs = lists;
      merged = next;
      return merged;
    },
    origin(tool) {
      for (const source of sources) {
        const origin = source.origin(tool);
        if (origin !== undefined) return origin;
      }
      return undefined;
    },
  };
}

/** One row of `GET /api/tools`. */
export interface ListedTool {
  readonly name: string;
  readonly source: string;
  readonly description: string;
  readonly parameters: Readonly<Record<string, unknown>>;
}

/** The body of `GET /api/tools`: every tool the model is offered now, with its source. */
export function listTools(source: ToolSource): { readonly tools: readonly ListedTool[] } {
  return {
    tools: source.tools().map((tool) => ({
      name: tool.name,
      source: source.origin(tool) ?? 'unknown',
      description: tool.description,
      parameters: tool.parameters,
    })),
  };
}

/** `GET /api/tools` on the gateway (token required: tool schemas describe what the daemon can do). */
export function createToolsRoute(source: ToolSource): HttpRoute {
  return {
    method: 'GET',
    path: '/api/tools',
    auth: 'token',
    handle(_request, response: ServerResponse) {
      const body = JSON.stringify(listTools(source));
      response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
      response.end(body);
    },
  };
}
