/**
 * What a started daemon has loaded: neither a terminal-only nor a Telegram daemon loads Node's
 * bundled undici (fetch, WebSocket) — ~13 MB of RSS an idle daemon does not need — and neither
 * does a turn against the model (the endpoint client, src/endpoint/client.ts, is node:http, not
 * fetch). An ES import of node:http would (its namespace reads the lazy WebSocket getters):
 * src/http/node-http.ts requires it instead. Read from process.moduleLoadList, written by a
 * preload when the daemon exits. The built Telegram daemon loads no node-fetch either: its Bot
 * API calls go over the node:http client, and the bundle replaces grammY's import of it.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI } from './fixtures/fake-openai.ts';
import { startTelegramPeer, type TelegramPeer } from './peers/telegram.ts';
import { runModuleScript } from './support/child.ts';
import { cliPath, startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { ensureDist } from './support/dist.ts';
import { until } from './support/wait.ts';

const root = join(import.meta.dirname, '..');
const UNDICI = 'NativeModule internal/deps/undici/undici';

/** What the preload lists: Node's own modules at exit, the ES modules loaded at ready, or the CommonJS modules required by exit. */
type Listing = 'native' | 'atReady' | 'required';

/**
 * The preload's source: at exit it writes process.moduleLoadList, with 'atReady' the URLs of
 * the ES modules loaded when the ready line was written (pino writes it with fs.writeSync), with
 * 'required' the paths in require's cache (every CommonJS module the process loaded).
 */
function preloadSource(list: string, listing: Listing): string {
  if (listing === 'required') return `import { writeFileSync } from 'node:fs';\nimport { createRequire } from 'node:module';\nconst { cache } = createRequire(import.meta.url);\nprocess.on('exit', () => writeFileSync(${JSON.stringify(list)}, JSON.stringify(Object.keys(cache))));\n`;
  if (listing === 'native') return `import { writeFileSync } from 'node:fs';\nprocess.on('exit', () => writeFileSync(${JSON.stringify(list)}, JSON.stringify(process.moduleLoadList)));\n`;
  return [
    `import fs from 'node:fs';`,
    `import { registerHooks } from 'node:module';`,
    `const loaded = [];`,
    `let atReady;`,
    `registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });`,
    `const writeSync = fs.writeSync;`,
    `fs.writeSync = function (fd, data, ...rest) { if (atReady === undefined && typeof data === 'string' && data.includes('"msg":"ready"')) atReady = [...loaded]; return writeSync.call(this, fd, data, ...rest); };`,
    `process.on('exit', () => writeSync(fs.openSync(${JSON.stringify(list)}, 'w'), JSON.stringify(atReady ?? null)));`,
  ].join('\n');
}

/**
 * Starts the daemon on `extra`, waits for ready on `stream`, runs `then` (e.g. a turn), stops it;
 * returns its process.moduleLoadList (or the ES modules loaded at ready).
 */
async function loadedBy(
  extra: string,
  stream: 'stdout' | 'stderr',
  listing: Listing = 'native',
  model = 'http://127.0.0.1:9/v1',
  then?: (daemon: Daemon) => Promise<void>,
  entry = cliPath,
): Promise<string[]> {
  const config = tempConfig(model, extra);
  try {
    const list = join(config.dir, 'modules.json');
    const preload = join(config.dir, 'preload.mjs');
    writeFileSync(preload, preloadSource(list, listing));
    const daemon = startDaemon(['start', '--config', config.file], {
      cwd: config.dir,
      env: { TEST_MODEL_KEY: 'sk-test' },
      command: [process.execPath, '--import', pathToFileURL(preload).href, entry],
    });
    await daemon.waitFor(/"msg":"ready"/, stream);
    await then?.(daemon);
    daemon.child.kill('SIGTERM');
    assert.equal((await daemon.exited).code, 0);
    return JSON.parse(readFileSync(list, 'utf8')) as string[];
  } finally {
    config.cleanup();
  }
}

describe('modules a started daemon loads', () => {
  let peer: TelegramPeer;
  before(async () => {
    peer = await startTelegramPeer({ flood: false });
  });
  after(async () => {
    await peer.close();
  });

  it('a terminal-only daemon loads neither node:http nor undici', async () => {
    const loaded = await loadedBy('[channels.terminal]\nuser = "tester"\n', 'stderr');
    assert.ok(loaded.includes('NativeModule fs'), 'the list is the real one');
    assert.ok(!loaded.includes(UNDICI), 'undici loaded');
    assert.ok(!loaded.includes('NativeModule http'), 'node:http loaded (no gateway, no HTTP channel)');
  });

  it('a Telegram daemon uses node:http without loading undici', async () => {
    const loaded = await loadedBy(`${peer.configSection()}allow = ["*"]\n`, 'stdout');
    assert.ok(loaded.includes('NativeModule http'), 'grammY and the webhook module load node:http');
    assert.ok(!loaded.includes(UNDICI), 'undici loaded: something imported node:http as an ES module, or touched fetch/WebSocket');
  });

  it("the built Telegram daemon (dist/) that has answered a message has loaded neither node-fetch nor the abort-controller polyfill (grammY's Node shim)", async () => {
    await ensureDist();
    const model = await startFakeOpenAI();
    try {
      model.script({ text: 'Hello from the model.' });
      const dm = { kind: 'dm', user: 'alice' } as const;
      const required = await loadedBy(`${peer.configSection()}allow = ["*"]\n`, 'stdout', 'required', model.baseUrl, async () => {
        await peer.post('alice', dm, 'hello');
        await until(() => peer.botMessages(dm).some((message) => message.text.includes('Hello from the model.')), 'the reply');
      }, join(root, 'dist', 'app', 'cli.js'));
      assert.equal(model.requests.length, 1, 'the model was called');
      assert.ok(required.length > 0, 'the list is the real one');
      const fromPackages = (name: string): string[] => required.filter((path) => path.includes(`/node_modules/${name}/`));
      assert.deepEqual(fromPackages('node-fetch'), [], 'node-fetch loaded: a grammY Api without the node:http fetch, or the bundle no longer replaces it (scripts/build.ts, shims)');
      assert.deepEqual(fromPackages('whatwg-url'), [], "node-fetch's whatwg-url loaded");
      assert.deepEqual(fromPackages('abort-controller'), [], 'the abort-controller polyfill loaded');
    } finally {
      await model.close();
    }
  });

  it('a turn against the model loads no undici: the endpoint client is node:http', async () => {
    const model = await startFakeOpenAI();
    try {
      model.script({ text: 'Hello from the model.' });
      const loaded = await loadedBy('[channels.terminal]\nuser = "tester"\n', 'stderr', 'native', model.baseUrl, async (daemon) => {
        daemon.child.stdin.write('hello\n');
        await daemon.waitFor(/Hello from the model\./, 'stdout');
      });
      assert.equal(model.requests.length, 1, 'the model was called');
      assert.ok(loaded.includes('NativeModule http'), 'the endpoint client loaded node:http');
      assert.ok(!loaded.includes(UNDICI), 'undici loaded: something on the model path used fetch, Response, Headers, FormData or an ES import of node:http');
    } finally {
      await model.close();
    }
  });

  it('a terminal-only daemon is ready before any built-in tool module or croner is loaded (they load after ready, croner for a cron task)', async () => {
    const loaded = await loadedBy('[channels.terminal]\nuser = "tester"\n', 'stderr', 'atReady');
    const ours = loaded.map((url) => url.replace(pathToFileURL(root).href, ''));
    assert.ok(ours.includes('/app/compose/tools.ts') && ours.includes('/src/store/lock.ts'), 'the list is the real one');
    const tools = ours.filter((url) => url.startsWith('/src/tools/') && !['/src/tools/clock.ts', '/src/tools/sources.ts'].includes(url));
    assert.deepEqual(tools, [], 'tool modules loaded before ready');
    assert.ok(!ours.includes('/src/security/ssrf.ts'), 'the SSRF guard loaded before ready');
    assert.ok(!loaded.some((url) => url.includes('/node_modules/croner/')), 'croner loaded with no cron task to fire');
  });

  it('the check is live: an ES import of node:http loads undici, src/http/node-http.ts does not', () => {
    const run = (code: string): string[] => runModuleScript<string[]>(`${code}\nprocess.stdout.write(JSON.stringify(process.moduleLoadList));`, { cwd: root });
    assert.ok(run(`await import('node:http');`).includes(UNDICI), 'Node no longer loads undici for the namespace: src/http/node-http.ts can go');
    const required = run(`const { createServer } = await import(${JSON.stringify(pathToFileURL(join(root, 'src/http/node-http.ts')).href)}); if (typeof createServer !== 'function') throw new Error('no createServer');`);
    assert.ok(required.includes('NativeModule http'));
    assert.ok(!required.includes(UNDICI));
  });
});
