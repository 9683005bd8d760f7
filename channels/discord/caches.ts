/**
 * What discord.js may keep in memory. Out of the box its caches grow with traffic: every
 * message author goes into `client.users`, every guild author into that guild's members, every
 * person who DMs the bot leaves a DM channel in `client.channels`. The channel reads messages
 * from the raw dispatches and asks REST for what it needs, so these caches serve discord.js
 * only; they are limited here, always keeping the bot's own user and members.
 *
 * `client.channels` cannot be given a limited collection (discord.js says that breaks it), so
 * DM channels are swept from it instead: one that carried no message for {@link DM_IDLE_MS}
 * is dropped, and discord.js makes it again (it is a partial) when that person writes next.
 */
import { Options, SnowflakeUtil, type Client, type ClientOptions } from 'discord.js';

/** Users kept in `client.users` (plus the bot itself). */
export const MAX_USERS = 1000;
/** Members kept per guild (plus the bot's own member, which permission checks read). */
export const MAX_MEMBERS_PER_GUILD = 100;
/** A DM channel without a message for this long leaves `client.channels`. */
export const DM_IDLE_MS = 3_600_000;
/** How often DM channels are swept. */
export const DM_SWEEP_INTERVAL_MS = 600_000;

const isBot = (id: string, client: Client): boolean => id === client.user?.id;

/** `makeCache` and `sweepers` for the channel's Client. */
export function cacheOptions(): Pick<ClientOptions, 'makeCache' | 'sweepers'> {
  return {
    makeCache: Options.cacheWithLimits({
      ...Options.DefaultMakeCacheSettings,
      // messages are read from the raw dispatches: discord.js need not keep any
      MessageManager: 0,
      UserManager: { maxSize: MAX_USERS, keepOverLimit: (user) => isBot(user.id, user.client) },
      GuildMemberManager: { maxSize: MAX_MEMBERS_PER_GUILD, keepOverLimit: (member) => isBot(member.id, member.client) },
      ThreadMemberManager: { maxSize: 0, keepOverLimit: (member) => isBot(member.id, member.client) },
      // without the presence, reaction and voice intents nothing should arrive; if it does, it is not kept
      PresenceManager: 0,
      ReactionManager: 0,
      ReactionUserManager: 0,
      VoiceStateManager: 0,
    }),
    // archived threads leave the cache 4 h after archiving (discord.js's default sweeper)
    sweepers: { ...Options.DefaultSweeperSettings },
  };
}

/** Drops DM channels idle for `idleMs` from `client.channels`; returns how many went. */
export function sweepDirectChannels(client: Client, now = Date.now(), idleMs = DM_IDLE_MS): number {
  return client.channels.cache.sweep((channel) => {
    if (!channel.isDMBased()) return false;
    const last = 'lastMessageId' in channel ? channel.lastMessageId : null;
    const at = last ? SnowflakeUtil.timestampFrom(last) : SnowflakeUtil.timestampFrom(channel.id);
    return now - at >= idleMs;
  });
}

/** Sweeps DM channels every {@link DM_SWEEP_INTERVAL_MS} until the returned function is called. */
export function startDirectChannelSweeper(client: Client, intervalMs = DM_SWEEP_INTERVAL_MS): () => void {
  const timer = setInterval(() => sweepDirectChannels(client), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
