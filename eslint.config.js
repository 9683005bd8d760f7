// Lint: typescript-eslint's recommended rules, plus the architecture rules — the core (src/)
// never reaches into platform adapters (channels/) or the composition root (app/), and every
// layer of the house imports only its own layer and the layers below it (docs/architecture.md) —
// and two type-aware rules: a promise nobody awaits or handles (a dropped rejection in a daemon that
// runs for months is a lost message), and a promise where a plain value is expected (an async
// callback to an API that ignores what it returns).
import { readdirSync } from 'node:fs';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The layers of src/, lowest first (docs/architecture.md). A layer may import its own layer and
 * the ones below; an import of a layer above it fails the lint, naming the rule. `folders` are
 * under src/; `files` are single files at the top of src/ that belong to the layer.
 */
const layers = [
  { name: 'base (contracts and utilities)', folders: ['config', 'setup'] },
  { name: 'plumbing', folders: ['store', 'security', 'http', 'endpoint', 'inbound', 'outbound'] },
  { name: 'services', folders: ['providers', 'media', 'memory', 'policy', 'schedule'] },
  { name: 'agent', folders: ['agent'] },
  { name: 'tools and runtime', folders: ['tools', 'runtime'] },
  { name: 'cluster', folders: ['cluster'] },
  { name: 'servers', folders: ['gateway', 'console'], files: ['metrics.ts', 'process-metrics.ts'] },
];
// A new folder of src/ must be placed in a layer: one in none would not be checked.
const unplaced = readdirSync(new URL('./src/', import.meta.url), { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && !layers.some((layer) => layer.folders.includes(entry.name)))
  .map((entry) => `src/${entry.name}/`);
if (unplaced.length > 0) throw new Error(`eslint.config.js: ${unplaced.join(', ')} is in no layer; add it to \`layers\` (and to the table in docs/architecture.md)`);
/** Peers in one layer that must not import each other either. */
const apart = [
  ['tools', 'runtime', 'a tool never drives the runtime, and the runtime knows tools only through the agent'],
  ['gateway', 'console', 'both stand on src/http/; the composition root mounts the console on the gateway'],
];
/**
 * Folders a layer may import only through the file that declares a port: the cluster's
 * PostgreSQL adapters implement the tools' RemoteToolPeers, and need nothing else of src/tools/.
 */
const portsOnly = [['cluster', 'tools', 'remote-peers.ts']];
const app = { group: ['**/channels/**', '**/app/**'], message: 'src/ never imports platform adapters or the composition root; inject them.' };
const why = 'layers import only downward; move the shared piece down to a lower layer, or inject it (docs/architecture.md)';
/** What a file of `layers[index]` (or `self`, one of its folders) may not import. */
function restricted(index, self) {
  const patterns = [];
  for (const upper of layers.slice(index + 1)) {
    const group = [...upper.folders.map((folder) => `**/${folder}/**`), ...(upper.files ?? []).map((file) => `**/${file}`)];
    patterns.push({ group, message: `the ${layers[index].name} layer must not import the ${upper.name} layer (${[...upper.folders.map((f) => `src/${f}/`), ...(upper.files ?? []).map((f) => `src/${f}`)].join(', ')}). Layer rule: ${why}.` });
  }
  for (const [a, b, reason] of apart) {
    const other = self === a ? b : self === b ? a : undefined;
    if (other) patterns.push({ group: [`**/${other}/**`], message: `src/${self}/ must not import src/${other}/: ${reason} (docs/architecture.md).` });
  }
  for (const [from, folder, port] of portsOnly) {
    if (self === from) patterns.push({ group: [`**/${folder}/**`, `!**/${folder}/${port}`], message: `src/${from}/ imports src/${folder}/ only through its port ${port} (docs/architecture.md).` });
  }
  return patterns;
}
/**
 * The same rule for `import()` expressions, which no-restricted-imports does not see (esquery's
 * regular expressions cannot hold a "/": \W stands for it).
 */
function restrictedDynamic(patterns) {
  return patterns.map(({ group, message }) => {
    const names = group.filter((g) => !g.startsWith('!')).map((g) => g.replace(/^\*\*\//, '').replace(/\/\*\*$/, '').replace(/\./g, '\\.').replace(/\//g, '\\W'));
    return { selector: `ImportExpression[source.value=/^\\.\\.?\\W(.*\\W)?(${names.join('|')})(\\W|$)/]`, message };
  });
}
/**
 * node:http's values come from src/http/node-http.ts: an ES import of node:http builds its
 * namespace, which loads Node's bundled undici (+13 MB RSS in an idle daemon; that file says why).
 */
const nodeHttp = [
  { selector: "ImportDeclaration[source.value=/^(node:)?http$/][importKind!='type']", message: "take node:http's values from src/http/node-http.ts (an ES import of node:http loads undici, +13 MB idle RSS); `import type` is fine." },
  { selector: 'ImportExpression[source.value=/^(node:)?http$/]', message: "take node:http's values from src/http/node-http.ts (an ES import of node:http loads undici, +13 MB idle RSS)." },
];
// Tests are left out: a test may put several layers together (and the src/ → channels, app rule still holds for them).
function layerBlock(files, patterns, { ignores = [], outer = app } = {}) {
  return {
    files,
    ignores: ['**/*.test.ts', ...ignores],
    rules: {
      'no-restricted-imports': ['error', { patterns: [outer, ...patterns] }],
      'no-restricted-syntax': ['error', ...restrictedDynamic(patterns), ...nodeHttp],
    },
  };
}
const layerBlocks = [
  layerBlock(['src/*.ts'], restricted(0, undefined), { ignores: layers.flatMap((layer) => (layer.files ?? []).map((file) => `src/${file}`)) }),
  ...layers.flatMap((layer, index) => [
    ...layer.folders.map((folder) => layerBlock([`src/${folder}/**/*.ts`], restricted(index, folder))),
    ...(layer.files ?? []).map((file) => layerBlock([`src/${file}`], restricted(index, undefined))),
  ]),
  // A channel uses the contracts and the helpers made for channels (src/inbound, src/outbound,
  // src/media, src/http, src/policy, src/config), and the console's chat port (the web channel).
  layerBlock(['channels/**/*.ts'], [
    {
      group: ['store', 'security', 'endpoint', 'providers', 'memory', 'schedule', 'agent', 'tools', 'runtime', 'cluster', 'gateway', 'console'].map((folder) => `**/src/${folder}/**`).concat(['**/src/metrics.ts', '**/src/process-metrics.ts', '!**/src/console/deps.ts']),
      message: `a channel imports only the contracts (src/*.ts) and the helpers made for channels (src/inbound, src/outbound, src/media, src/http, src/policy, src/config, src/setup, the console's chat port src/console/deps.ts). Layer rule: ${why}.`,
    },
  ], { outer: { group: ['**/app/**'], message: 'a channel never imports the composition root (app/); it is handed what it needs in ChannelContext.' } }),
];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/', '.bench/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly', AbortSignal: 'readonly', AbortController: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', performance: 'readonly', fetch: 'readonly', Buffer: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  {
    files: ['src/**/*.ts', 'app/**/*.ts', 'channels/**/*.ts', 'scripts/**/*.ts', 'test/**/*.ts', 'console/**/*.{ts,tsx}'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // node:test's describe/it return promises the runner itself awaits
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }] }],
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [app] }],
      'no-console': 'error',
    },
  },
  ...layerBlocks,
  {
    files: ['channels/**/*.ts'],
    rules: { 'no-console': 'error' },
  },
  {
    files: ['app/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: { 'no-restricted-syntax': ['error', ...nodeHttp] },
  },
  {
    // The web console's front end runs in the browser.
    files: ['console/**/*.{ts,tsx}'],
    languageOptions: {
      globals: { window: 'readonly', document: 'readonly', location: 'readonly', fetch: 'readonly', EventSource: 'readonly', FileReader: 'readonly', File: 'readonly', URLSearchParams: 'readonly', addEventListener: 'readonly', removeEventListener: 'readonly', HTMLDivElement: 'readonly', HTMLInputElement: 'readonly', MessageEvent: 'readonly', Event: 'readonly' },
    },
    rules: { 'no-console': 'error' },
  },
);
