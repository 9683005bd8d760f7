/** The email channel as one unit: what channels/registry.ts lists (see src/channel-module.ts). */
import { defineChannel } from '../../src/channel-module.ts';
import { EmailSchema } from './config.ts';

export const email = defineChannel({
  name: 'email',
  schema: EmailSchema,
  docs: 'docs/channels/email.md',
  create: async (section, { context }) => (await import('./index.ts')).createEmailChannel(section, context),
  probe: async (section, timeoutMs) => (await import('./doctor.ts')).probe(section, timeoutMs),
  onboard: async (ask) => (await import('./onboard.ts')).onboard(ask),
});
