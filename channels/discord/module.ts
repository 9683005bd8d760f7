/** The discord channel as one unit: what channels/registry.ts lists (see src/channel-module.ts). */
import { defineChannel } from '../../src/channel-module.ts';
import { DiscordSchema } from './config.ts';

export const discord = defineChannel({
  name: 'discord',
  schema: DiscordSchema,
  docs: 'docs/channels/discord.md',
  create: async (section, { context }) => (await import('./index.ts')).createDiscordChannel(section, context),
  probe: async (section, timeoutMs) => (await import('./doctor.ts')).probe(section, timeoutMs),
  onboard: async (ask) => (await import('./onboard.ts')).onboard(ask),
});
