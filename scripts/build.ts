/**
 * Builds the daemon's dist/app/ with rolldown: `app/cli.ts` and the recall worker as entries,
 * ES modules, every `import()` its own lazily loaded chunk (a channel's SDK, the console, the
 * PostgreSQL store, the CLI commands, the tools loaded after ready) — so a one-channel daemon
 * still loads no other channel's code.
 *
 *   node scripts/build.ts        (npm run build runs it after the type check)
 *
 * Why a bundle and not tsc's one file per module: the daemon read ~195 files before "ready"
 * (134 of ours, 61 of small pure-JS packages), each resolved, read, compiled and linked on its
 * own; the bundle reads ~30 (docs/benchmarks.md, "Start": −40 to −55 ms spawn → ready).
 *
 * - What the daemon imports statically (app/daemon.ts's static closure) is one chunk, and so is
 *   the SQLite memory's: without the groups rolldown cuts them into a chunk per set of
 *   importers, ~50 files before ready. The recall worker's own modules stay out of both groups,
 *   or the worker thread would load the whole daemon chunk for one constant.
 * - `bundled` packages are pure JavaScript loaded before ready, read nothing of their own at
 *   run time, and are inlined with everything they import. Every other package stays an import
 *   of node_modules: native ones (better-sqlite3, sharp), SDKs loaded on first use, and what
 *   is required at run time on first use (pino-pretty for a terminal, marked for the first
 *   reply: src/log.ts, src/outbound/markdown.ts). grammY is inlined too, into the Telegram
 *   channel's chunk: only the parts the channel uses (`grammyParts`), with its node-fetch and
 *   abort-controller imports replaced (`shims`).
 * - Everything sits in dist/app/, as tsc's dist/app/*.js did: the code that finds the install
 *   from its own file (src/version.ts, app/invocation.ts, app/service.ts, app/console.ts) sees
 *   the same directory whichever chunk it landed in, and the recall worker is
 *   dist/app/recall-worker.js beside src/memory/recall-client.ts's chunk.
 */
import { rmSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, resolve } from 'node:path';
import { build, type Plugin } from 'rolldown';

const root = join(import.meta.dirname, '..');
const out = join(root, 'dist', 'app');

/**
 * Packages inlined into the bundle (with what they import): pure JS, loaded before ready — and
 * grammY, inlined into the Telegram channel's own chunk so that its Node shim's two imports can
 * be replaced (`shims`).
 */
const bundled = new Set(['pino', 'smol-toml', 'p-queue', 'valibot', 'grammy']);

/**
 * What grammY's Node shim (grammy/out/shim.node.js) requires as soon as grammY is imported,
 * replaced in the bundle: node-fetch (with whatwg-url, tr46's tables and zlib), which the
 * Telegram channel never calls — its Api clients are given our node:http fetch
 * (channels/telegram/transport.ts) — and the abort-controller polyfill (with event-target-shim),
 * for which Node's own AbortController stands in. A grammY client made without that fetch fails
 * with the error below instead of silently loading node-fetch.
 */
const shims: Readonly<Record<string, string>> = {
  'node-fetch': [
    `function fetch() { return Promise.reject(new Error("node-fetch is not in this build: give grammY's Api the node:http fetch (channels/telegram/transport.ts, botApiFetch)")); }`,
    `module.exports = fetch;`,
    `module.exports.default = fetch;`,
  ].join('\n'),
  'abort-controller': `module.exports = { AbortController: globalThis.AbortController, AbortSignal: globalThis.AbortSignal, default: globalThis.AbortController };`,
};

/**
 * What the Telegram channel takes of grammY, from the files that define it: grammY's index
 * (out/mod.js) also requires the Bot, its middleware, the Context with its hundreds of
 * shortcuts, filter queries, keyboards, sessions and webhook adapters, none of which the channel
 * uses (it runs its own poll loop and webhook). The package's `exports` map hides these files
 * from an import, not from the bundler; a name missing here fails the build.
 */
const grammyParts: Readonly<Record<string, readonly string[]>> = {
  'core/api.js': ['Api'],
  'core/error.js': ['GrammyError', 'HttpError'],
  'types.node.js': ['InputFile'],
};

/** Resolves grammY's imports of `shims` to them, and our imports of grammY to `grammyParts`. */
function grammyShims(): Plugin {
  const prefix = '\0grammy-shim:';
  const parts = '\0grammy-parts';
  const out = join(root, 'node_modules', 'grammy', 'out');
  return {
    name: 'grammy-shims',
    resolveId(id, importer) {
      if (importer === undefined) return null;
      if (Object.hasOwn(shims, id) && /[\\/]node_modules[\\/]grammy[\\/]/.test(importer)) return prefix + id;
      if (id === 'grammy' && !inNodeModules(importer)) return parts;
      return null;
    },
    load(id) {
      if (id === parts) return Object.entries(grammyParts).map(([file, names]) => `export { ${names.join(', ')} } from ${JSON.stringify(join(out, file))};`).join('\n');
      return id.startsWith(prefix) ? shims[id.slice(prefix.length)] : null;
    },
  };
}

/** The recall worker thread's entry: a bundle entry of its own (src/memory/recall-client.ts starts it by path). */
const workerEntry = 'src/memory/recall-worker.ts';
/** Chunks of one static closure each, in priority order: name → the module it starts from. */
const groups: ReadonlyArray<{ readonly name: string; readonly from: string }> = [
  { name: 'daemon', from: 'app/daemon.ts' },
  { name: 'memory', from: 'src/memory/sqlite.ts' },
];

const packageOf = (id: string): string => (id.startsWith('@') ? id.split('/').slice(0, 2).join('/') : id.split('/')[0]!);
const inNodeModules = (path: string | undefined): boolean => path !== undefined && /[\\/]node_modules[\\/]/.test(path);

/** A package import stays external unless it is `bundled` or imported by a package that is. */
function external(id: string, importer: string | undefined): boolean {
  if (id.startsWith('node:') || builtinModules.includes(id)) return true;
  if (id.startsWith('.') || id.startsWith('/') || id.startsWith('\0')) return false;
  return !(bundled.has(packageOf(id)) || inNodeModules(importer));
}

/**
 * Fills `members` (group name → module ids) at the end of the module graph: each group's static
 * closure minus what an earlier group took, and first a `recall` group of what the recall worker
 * shares with them — a group also takes the dependencies of what it captures, and the worker
 * thread must not load the daemon's chunk for them.
 */
function closures(members: Map<string, Set<string>>): Plugin {
  return {
    name: 'static-closures',
    buildEnd() {
      const closure = (from: string): Set<string> => {
        const seen = new Set<string>();
        const stack = [resolve(root, from)];
        for (let id = stack.pop(); id !== undefined; id = stack.pop()) {
          if (seen.has(id)) continue;
          const info = this.getModuleInfo(id);
          if (info === null) continue; // external
          seen.add(id);
          stack.push(...info.importedIds);
        }
        return seen;
      };
      const grouped = groups.map((group) => ({ name: group.name, ids: closure(group.from) }));
      const recall = [...closure(workerEntry)].filter((id) => grouped.some((group) => group.ids.has(id)));
      const taken = new Set<string>();
      for (const { name, ids } of [{ name: 'recall', ids: new Set(recall) }, ...grouped]) {
        members.set(name, new Set([...ids].filter((id) => !taken.has(id))));
        for (const id of ids) taken.add(id);
      }
    },
  };
}

async function main(): Promise<void> {
  const members = new Map<string, Set<string>>();
  rmSync(out, { recursive: true, force: true });
  // tsc's layout of earlier builds: nothing reads it any more, and a stale copy would only mislead.
  for (const old of ['src', 'channels']) rmSync(join(root, 'dist', old), { recursive: true, force: true });
  await build({
    cwd: root,
    input: { cli: 'app/cli.ts', 'recall-worker': workerEntry },
    platform: 'node',
    external,
    plugins: [grammyShims(), closures(members)],
    logLevel: 'warn',
    // app/daemon.ts import()s src/tools/sources.ts for the console, which the tools' composition
    // already imports: an import() of what is loaded anyway is fine, and needs no chunk of its own.
    checks: { ineffectiveDynamicImport: false },
    output: {
      dir: out,
      format: 'esm',
      entryFileNames: '[name].js',
      chunkFileNames: '[name]-[hash].js',
      // maps as tsc's were: lines of dist/app/*.js back to src/, app/ and channels/, without copies of them
      sourcemap: true,
      sourcemapExcludeSources: true,
      // V8 keeps each module's source text for as long as the module lives: without comments, and
      // in ASCII (one non-ASCII character — a "→" in a comment — makes V8 store the whole text in
      // two bytes a character), the daemon's chunk is held in ~0.4 MB instead of ~1.3 MB.
      // Licence comments stay; the source maps still lead back to the commented sources.
      comments: { legal: true, annotation: false, jsdoc: false },
      charset: 'ascii',
      codeSplitting: {
        groups: ['recall', ...groups.map((group) => group.name)].map((name, index, names) => ({ name, priority: names.length - index, test: (id: string) => members.get(name)?.has(id) === true })),
      },
    },
  });
}

await main();
