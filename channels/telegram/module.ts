/** The telegram channel as one unit: what channels/registry.ts lists (see src/channel-module.ts). */
import { defineChannel } from '../../src/channel-module.ts';
import { TelegramSchema } from './config.ts';

export const telegram = defineChannel({
  name: 'telegram',
  schema: TelegramSchema,
  docs: 'docs/channels/telegram.md',
  create: async (section, { context }) => (await import('./index.ts')).createTelegramChannel(section, context),
  probe: async (section, timeoutMs) => (await import('./doctor.ts')).probe(section, timeoutMs),
  onboard: async (ask) => (await import('./onboard.ts')).onboard(ask),
});
