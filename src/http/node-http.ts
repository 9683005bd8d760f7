/**
 * node:http, required instead of imported. An ES `import … from 'node:http'` (static or
 * dynamic) builds the module's namespace, which reads every export — and node:http's lazy
 * `WebSocket`, `CloseEvent` and `MessageEvent` getters load Node's bundled undici to answer.
 * Measured on Node 24 (bare probe, idle): 58.0 MB RSS imported against 45.0 MB required
 * (+6.5 MB of the binary's pages, +6.2 MB private). `require` returns the exports object
 * without touching the getters, so undici stays unloaded until something really uses fetch.
 * node:http is the only built-in that does this (https, net, stream, crypto do not).
 *
 * Import types from 'node:http' as usual (`import type` costs nothing); take values from here.
 * test/startup-modules.e2e.test.ts holds a daemon to it.
 */
import { createRequire } from 'node:module';
import type * as Http from 'node:http';

const http = createRequire(import.meta.url)('node:http') as typeof Http;

export const createServer: typeof Http.createServer = http.createServer;
export const httpRequest: typeof Http.request = http.request;
export const httpAgent: typeof Http.Agent = http.Agent;
export const STATUS_CODES: typeof Http.STATUS_CODES = http.STATUS_CODES;
