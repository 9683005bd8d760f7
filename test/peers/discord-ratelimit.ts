/**
 * Discord's REST rate limits, as the local Discord peer applies them: per-route buckets keyed
 * by route and top-level resource (the channel id), and the global limit of every request the
 * bot makes. Source: discord/discord-api-docs, developers/topics/rate-limits.mdx —
 * "Header Format" (X-RateLimit-Limit / -Remaining / -Reset / -Reset-After / -Bucket, and on a
 * 429 only: -Global, -Scope), "Exceeding A Rate Limit" (429 body `{message, retry_after,
 * global}`, `Retry-After` header; a global 429 carries X-RateLimit-Global and scope `global`,
 * without the route headers), "Global Rate Limit" (50 requests per second).
 *
 * Discord documents no numbers per route and says not to hard-code them; the defaults here are
 * what its headers show for the routes the adapter calls: 5 per 5 s per channel for creating
 * messages and for editing them (discord/discord-api-docs#20: "5/5 … applies to message
 * creation and editing"; editing has its own bucket hash, discord/discord-api-docs#1135), and
 * the same for the typing route. Tests compress the windows through the peer's options.
 */
import type { RESTRateLimit } from 'discord-api-types/v10';

/** One fixed window: `limit` requests per `resetAfterMs`. */
export interface BucketSpec {
  readonly limit: number;
  readonly resetAfterMs: number;
}

export interface DiscordRateLimits {
  /** POST /channels/{id}/messages, per channel. @default 5 per 5000 ms */
  readonly messages?: BucketSpec;
  /** PATCH /channels/{id}/messages/{id} (edits), per channel. @default 5 per 5000 ms */
  readonly edits?: BucketSpec;
  /** POST /channels/{id}/typing, per channel. @default 5 per 5000 ms */
  readonly typing?: BucketSpec;
  /** Every authorised request of the bot. @default 50 per 1000 ms */
  readonly global?: BucketSpec;
}

/** Every bucket lifted: for tests and benches about something else than Discord's limits. */
const LIFTED_BUCKET: BucketSpec = { limit: 1_000_000, resetAfterMs: 1000 };
export const DISCORD_LIFTED: Required<DiscordRateLimits> = { messages: LIFTED_BUCKET, edits: LIFTED_BUCKET, typing: LIFTED_BUCKET, global: LIFTED_BUCKET };

export type BucketRoute = 'messages' | 'edits' | 'typing';

const DEFAULTS: Required<DiscordRateLimits> = {
  messages: { limit: 5, resetAfterMs: 5000 },
  edits: { limit: 5, resetAfterMs: 5000 },
  typing: { limit: 5, resetAfterMs: 5000 },
  global: { limit: 50, resetAfterMs: 1000 },
};

/** The bucket hash Discord sends (the same for every channel: "non-inclusive of top-level resources"). */
const HASHES: Record<BucketRoute, string> = { messages: 'b6a2c1f0messagescreate', edits: 'c0ffee11messagesedit', typing: 'a11ce5typing' };

interface Window {
  count: number;
  resetAt: number;
}

/** What the peer answers: go ahead (with these headers), or a 429. */
export type Verdict =
  | { readonly ok: true; readonly headers: Record<string, string> }
  | { readonly ok: false; readonly headers: Record<string, string>; readonly body: RESTRateLimit };

export class RateLimiter {
  readonly #specs: Required<DiscordRateLimits>;
  readonly #windows = new Map<string, Window>();
  #global: Window = { count: 0, resetAt: 0 };
  /** Until when a 429 told the bot to leave a channel alone (ms since the epoch). */
  readonly #waits = new Map<string, number>();
  #globalWaitUntil = 0;
  /** Requests for a channel that arrived while a wait announced for it was still running. */
  readonly #inside = new Map<string, number>();
  /** 429s answered. */
  limited = 0;

  constructor(limits: DiscordRateLimits = {}) {
    this.#specs = { ...DEFAULTS, ...limits };
  }

  /**
   * Checks one request (route bucket when it has one, the channel it is for when any) and
   * counts it. Call once per authorised request, before handling it.
   */
  check(route: BucketRoute | undefined, channelId: string | undefined, now = Date.now()): Verdict {
    if (channelId !== undefined && (now < (this.#waits.get(channelId) ?? 0) || now < this.#globalWaitUntil)) {
      this.#inside.set(channelId, (this.#inside.get(channelId) ?? 0) + 1);
    }
    const global = this.#specs.global;
    if (now >= this.#global.resetAt) this.#global = { count: 0, resetAt: now + global.resetAfterMs };
    if (this.#global.count >= global.limit) {
      const seconds = (this.#global.resetAt - now) / 1000;
      this.#globalWaitUntil = Math.max(this.#globalWaitUntil, this.#global.resetAt);
      this.limited++;
      return {
        ok: false,
        headers: { 'retry-after': String(Math.ceil(seconds)), 'x-ratelimit-global': 'true', 'x-ratelimit-scope': 'global' },
        body: { message: 'You are being rate limited.', retry_after: round(seconds), global: true },
      };
    }
    this.#global.count++;
    if (route === undefined || channelId === undefined) return { ok: true, headers: {} };
    const spec = this.#specs[route];
    const key = `${route}:${channelId}`;
    let window = this.#windows.get(key);
    if (!window || now >= window.resetAt) {
      window = { count: 0, resetAt: now + spec.resetAfterMs };
      this.#windows.set(key, window);
    }
    const headers = (remaining: number): Record<string, string> => ({
      'x-ratelimit-limit': String(spec.limit),
      'x-ratelimit-remaining': String(remaining),
      'x-ratelimit-reset': String(round(window.resetAt / 1000)),
      'x-ratelimit-reset-after': String(round((window.resetAt - now) / 1000)),
      'x-ratelimit-bucket': HASHES[route],
    });
    if (window.count >= spec.limit) {
      const seconds = (window.resetAt - now) / 1000;
      this.#waits.set(channelId, Math.max(this.#waits.get(channelId) ?? 0, window.resetAt));
      this.limited++;
      return {
        ok: false,
        headers: { ...headers(0), 'retry-after': String(Math.ceil(seconds)), 'x-ratelimit-scope': 'user' },
        body: { message: 'You are being rate limited.', retry_after: round(seconds), global: false },
      };
    }
    window.count++;
    return { ok: true, headers: headers(spec.limit - window.count) };
  }

  /** Empties a channel's bucket of `route` for `ms` (a test's forced rate limit). */
  exhaust(route: BucketRoute, channelId: string, ms: number, now = Date.now()): void {
    this.#windows.set(`${route}:${channelId}`, { count: this.#specs[route].limit, resetAt: now + ms });
  }

  /** Requests for `channelId` that arrived inside a wait the peer had announced with a 429. */
  callsInsideWait(channelId: string): number {
    return this.#inside.get(channelId) ?? 0;
  }

  reset(): void {
    this.#windows.clear();
    this.#waits.clear();
    this.#inside.clear();
    this.#global = { count: 0, resetAt: 0 };
    this.#globalWaitUntil = 0;
  }
}

const round = (value: number): number => Math.round(value * 1000) / 1000;
