// Lint: typescript-eslint's recommended rules, plus the architecture rule that the core
// (src/) never reaches into platform adapters (channels/) or the composition root (app/), and
// two type-aware rules: a promise nobody awaits or handles (a dropped rejection in a daemon that
// runs for months is a lost message), and a promise where a plain value is expected (an async
// callback to an API that ignores what it returns).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/channels/**', '**/app/**'], message: 'src/ never imports platform adapters or the composition root; inject them.' }] }],
      'no-console': 'error',
    },
  },
  {
    files: ['channels/**/*.ts'],
    rules: { 'no-console': 'error' },
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
