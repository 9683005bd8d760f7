/**
 * The builders every part of the config schema is made of — the core tables here in
 * src/config/schema.ts and each channel's own table in channels/<name>/config.ts — so a
 * number, a URL or a listen address is described (and its error worded) the same everywhere.
 */
import * as v from 'valibot';

/** A whole number in [min, max] with a default. */
export const int = (min: number, max: number, fallback: number) =>
  v.optional(v.pipe(v.number(), v.integer(), v.minValue(min), v.maxValue(max), v.examples([fallback])), fallback);

/** A number (fractions allowed) in [min, max] with a default. */
export const num = (min: number, max: number, fallback: number) => v.optional(v.pipe(v.number(), v.minValue(min), v.maxValue(max), v.examples([fallback])), fallback);

/** A number in (0, max] with a default: durations that must not be zero. */
export const positive = (max: number, fallback: number) => v.optional(v.pipe(v.number(), v.gtValue(0), v.maxValue(max), v.examples([fallback])), fallback);

/** A non-empty string. */
export const text = (example: string) => v.pipe(v.string(), v.nonEmpty(), v.examples([example]));

/** A non-empty string with a default. */
export const textOr = (example: string, fallback: string) => v.optional(text(example), fallback);

export const choice = <const T extends string>(values: readonly [T, ...T[]], fallback: T) => v.optional(v.pipe(v.picklist(values), v.examples([fallback])), fallback);

/** An http(s) URL with an example (errors quote the description). */
export const httpUrl = (example: string) => v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/, 'an http:// or https:// URL'), v.examples([example]));

/** host:port for a listener this daemon opens. */
export const listenAddress = (example: string) => v.pipe(v.string(), v.regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'a host:port address'), v.examples([example]));

/** The conversation policy every chat channel shares (the terminal is exempt). */
export const policy = {
  /** Sender ids let through; ["*"] = anyone. Without it, unknown senders get a pairing code. */
  allow: v.optional(v.pipe(v.array(text('123456789')), v.examples([['123456789']]))),
  /** In groups, rooms and channels answer only when addressed. */
  mention_only: v.optional(v.pipe(v.boolean(), v.examples([true])), true),
  /** Show the reply growing as the model writes it (edits one message). */
  stream: v.optional(v.pipe(v.boolean(), v.examples([false])), false),
};

/** The policy keys every chat channel section has. */
export interface ChannelPolicyConfig {
  readonly allow?: string[] | undefined;
  readonly mention_only?: boolean;
  readonly stream?: boolean;
}
