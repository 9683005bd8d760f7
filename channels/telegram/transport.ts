import type { ApiClientOptions } from 'grammy';
import { createEndpointFetch } from '../../src/http/fetch.ts';

/**
 * The `fetch` grammY's Api calls the Bot API with: our node:http client (src/http/fetch.ts),
 * one keep-alive pool per channel, instead of node-fetch — which cost ~11 % of the main thread
 * per message in header handling, url.parse and its agent path. Its failures keep fetch's shapes,
 * so grammY wraps them in the same HttpError: `TypeError('fetch failed')` with the system error
 * as `cause` (errors.ts, describeError), an abort's AbortError.
 */
export function botApiFetch(): NonNullable<ApiClientOptions['fetch']> {
  return createEndpointFetch() as unknown as NonNullable<ApiClientOptions['fetch']>;
}
