/** `[channels.slack]`: the keys, their defaults and an example of each (errors quote it). */
import * as v from 'valibot';
import { listenAddress, policy, text } from '../../src/config/fields.ts';

export const SlackSchema = v.pipe(
  v.strictObject({
    bot_token: text('${SLACK_BOT_TOKEN}'),
    /** Socket Mode (xapp-…). */
    app_token: v.optional(text('${SLACK_APP_TOKEN}')),
    /** HTTP Events API instead of Socket Mode: requests are verified with this. */
    signing_secret: v.optional(text('${SLACK_SIGNING_SECRET}')),
    /** Where the HTTP Events API listener binds (HTTP mode only). */
    listen: v.optional(listenAddress('127.0.0.1:3000'), '127.0.0.1:3000'),
    /** Web API base (a local peer in tests). */
    api_url: v.optional(v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/, 'an http:// or https:// URL'), v.examples(['https://slack.com/api/']))),
    ...policy,
  }),
  v.check((slack) => slack.app_token !== undefined || slack.signing_secret !== undefined, 'needs app_token (Socket Mode) or signing_secret (HTTP events)'),
);

/** The validated `[channels.slack]` table, defaults filled in. */
export type SlackConfig = v.InferOutput<typeof SlackSchema>;
