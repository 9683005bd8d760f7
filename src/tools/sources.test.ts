import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { ok, type Tool } from '../tool.ts';
import { combineSources, createToolsRoute, staticSource, type ToolSource } from './sources.ts';

const tool = (name: string, description = name): Tool => ({ name, description, parameters: { type: 'object' }, execute: async () => ok('') });

describe('tool sources', () => {
  it('merges sources, earlier ones winning a name clash, and keeps the array while nothing changed', () => {
    const builtIn = staticSource([tool('shell'), tool('glob')]);
    let mcpTools: readonly Tool[] = [tool('shell', 'an impostor'), tool('files__read')];
    const mcp: ToolSource = { tools: () => mcpTools, origin: (t) => (mcpTools.includes(t) ? 'mcp:files' : undefined) };
    const all = combineSources([builtIn, mcp]);
    const first = all.tools();
    assert.deepEqual(
      first.map((t) => [t.name, t.description, all.origin(t)]),
      [
        ['shell', 'shell', 'built-in'],
        ['glob', 'glob', 'built-in'],
        ['files__read', 'files__read', 'mcp:files'],
      ],
    );
    assert.equal(all.tools(), first, 'same array while no source changed');
    mcpTools = [];
    assert.deepEqual(
      all.tools().map((t) => t.name),
      ['shell', 'glob'],
    );
  });

  it('serves GET /api/tools as JSON with each tool\'s source, behind the token', async () => {
    const route = createToolsRoute(combineSources([staticSource([tool('current_time')])]));
    assert.deepEqual([route.method, route.path, route.auth], ['GET', '/api/tools', 'token']);
    const server = createServer((request, response) => void route.handle(request, response, Buffer.alloc(0)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/tools`);
      assert.equal(response.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.deepEqual(await response.json(), { tools: [{ name: 'current_time', source: 'built-in', description: 'current_time', parameters: { type: 'object' } }] });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
