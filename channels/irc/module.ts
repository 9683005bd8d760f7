/** The irc channel as one unit: what channels/registry.ts lists (see src/channel-module.ts). */
import { defineChannel } from '../../src/channel-module.ts';
import { IrcSchema } from './config.ts';

export const irc = defineChannel({
  name: 'irc',
  schema: IrcSchema,
  docs: 'docs/channels/irc.md',
  create: async (section, { context }) => (await import('./index.ts')).createIrcChannel(section, context),
  probe: async (section, timeoutMs) => (await import('./doctor.ts')).probe(section, timeoutMs),
  onboard: async (ask) => (await import('./onboard.ts')).onboard(ask),
});
