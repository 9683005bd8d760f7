import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client, GatewayIntentBits, SnowflakeUtil, type Guild } from 'discord.js';
import { cacheOptions, DM_IDLE_MS, MAX_MEMBERS_PER_GUILD, MAX_USERS, sweepDirectChannels } from './caches.ts';

/** discord.js's own way into a cache: what its gateway handlers call for each dispatch. */
interface Adder<T = unknown> {
  _add(data: Record<string, unknown>): T;
}

const bot = { id: '1', username: 'switchboard', discriminator: '0', bot: true };
const snowflake = (msAgo: number): string => SnowflakeUtil.generate({ timestamp: Date.now() - msAgo }).toString();

function client(): Client {
  const discord = new Client({ intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages], ...cacheOptions() });
  (discord.users as unknown as Adder)._add(bot);
  // what READY sets: only the id is read by the limits
  Object.assign(discord, { user: { id: bot.id } });
  return discord;
}

describe('discord.js caches', () => {
  it('keeps at most MAX_USERS users, the bot among them, however many people write', async () => {
    const discord = client();
    const users = discord.users as unknown as Adder;
    for (let i = 0; i < 5 * MAX_USERS; i++) users._add({ id: String(1_000_000 + i), username: `person${i}`, discriminator: '0' });
    assert.equal(discord.users.cache.size, MAX_USERS);
    assert.ok(discord.users.cache.has(bot.id));
    await discord.destroy();
  });

  it('keeps at most MAX_MEMBERS_PER_GUILD members per guild, the bot’s own member among them', async () => {
    const discord = client();
    const guild = (discord.guilds as unknown as Adder<Guild>)._add({ id: '500', name: 'guild', channels: [], members: [], roles: [] });
    const members = guild.members as unknown as Adder;
    members._add({ user: bot, roles: [] });
    for (let i = 0; i < 10 * MAX_MEMBERS_PER_GUILD; i++) members._add({ user: { id: String(2_000_000 + i), username: `member${i}`, discriminator: '0' }, roles: [] });
    assert.equal(guild.members.cache.size, MAX_MEMBERS_PER_GUILD);
    assert.ok(guild.members.cache.has(bot.id));
    await discord.destroy();
  });

  it('keeps no messages', async () => {
    const discord = client();
    const channel = (discord.channels as unknown as Adder<{ messages: { cache: Map<string, unknown> } & Adder }>)._add({ id: snowflake(0), type: 1, recipients: [] });
    channel.messages._add({ id: snowflake(0), channel_id: '1', author: bot, content: 'hi', timestamp: new Date().toISOString(), attachments: [], embeds: [], mentions: [], type: 0 });
    assert.equal(channel.messages.cache.size, 0);
    await discord.destroy();
  });

  it('sweeps DM channels idle for DM_IDLE_MS and keeps the active ones', async () => {
    const discord = client();
    const channels = discord.channels as unknown as Adder;
    for (let i = 0; i < 100; i++) channels._add({ id: snowflake(2 * DM_IDLE_MS + i), type: 1, last_message_id: snowflake(2 * DM_IDLE_MS), recipients: [] });
    const active = snowflake(2 * DM_IDLE_MS);
    channels._add({ id: active, type: 1, last_message_id: snowflake(60_000), recipients: [] });
    assert.equal(discord.channels.cache.size, 101);
    assert.equal(sweepDirectChannels(discord), 100);
    assert.deepEqual([...discord.channels.cache.keys()], [active]);
    await discord.destroy();
  });
});
