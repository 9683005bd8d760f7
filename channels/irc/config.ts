/** `[channels.irc]`: the keys, their defaults and an example of each (errors quote it). */
import * as v from 'valibot';
import { num, policy, text } from '../../src/config/fields.ts';

export const IrcSchema = v.strictObject({
  host: text('irc.libera.chat'),
  port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65_535), v.examples([6697]))),
  tls: v.optional(v.pipe(v.boolean(), v.examples([true])), true),
  nick: v.pipe(v.string(), v.regex(/^[A-Za-z[\]\\`_^{|}][A-Za-z0-9[\]\\`_^{|}-]{0,29}$/, 'an IRC nick: a letter or one of [ ] \\ ` _ ^ { | } first, then also digits and -, at most 30'), v.examples(['switchboard'])),
  /** Channels to join (with their key after a space, if any). */
  channels: v.optional(v.pipe(v.array(text('#switchboard')), v.examples([['#switchboard']])), []),
  /** Server password (PASS). */
  password: v.optional(text('${IRC_SERVER_PASSWORD}')),
  sasl: v.optional(v.strictObject({ user: text('switchboard'), password: text('${IRC_SASL_PASSWORD}') })),
  nickserv_password: v.optional(text('${IRC_NICKSERV_PASSWORD}')),
  /** Rejoin a channel after being kicked from it. */
  rejoin_on_kick: v.optional(v.pipe(v.boolean(), v.examples([true])), true),
  /** Reply lines sent per second (servers throttle floods). */
  lines_per_second: num(0.1, 50, 1),
  /** Nick or nick!user@host masks (* and ? wildcards); ["*"] = anyone. */
  allow: policy.allow,
  mention_only: policy.mention_only,
});

/** The validated `[channels.irc]` table, defaults filled in. */
export type IrcConfig = v.InferOutput<typeof IrcSchema>;
