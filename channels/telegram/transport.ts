import type { ApiClientOptions } from 'grammy';
import { createEndpointFetch } from '../../src/http/fetch.ts';

/**
 * How long an idle connection to the Bot API is kept. node-fetch's pool (grammY's keep-alive
 * agent) kept them until the server closed them; the endpoint client's default, 4 s, would make
 * most replies — sent after a model turn of several seconds — open a new TLS connection to
 * Telegram. Half a minute covers a turn and stays under common NAT idle timeouts.
 */
const IDLE_MS = 30_000;

/**
 * The `fetch` grammY's Api calls the Bot API with: our node:http client (src/http/fetch.ts),
 * one keep-alive pool per channel, instead of node-fetch — which cost ~11 % of the main thread
 * per message in header handling, url.parse and its agent path. Its failures keep fetch's shapes,
 * so grammY wraps them in the same HttpError: `TypeError('fetch failed')` with the system error
 * as `cause` (errors.ts, describeError), an abort's AbortError.
 */
export function botApiFetch(): NonNullable<ApiClientOptions['fetch']> {
  return createEndpointFetch({ idleMs: IDLE_MS }) as unknown as NonNullable<ApiClientOptions['fetch']>;
}
