/** The slack channel as one unit: what channels/registry.ts lists (see src/channel-module.ts). */
import { defineChannel } from '../../src/channel-module.ts';
import { SlackSchema } from './config.ts';

export const slack = defineChannel({
  name: 'slack',
  schema: SlackSchema,
  docs: 'docs/channels/slack.md',
  create: async (section, { context }) => (await import('./index.ts')).createSlackChannel(section, context),
  probe: async (section, timeoutMs) => (await import('./doctor.ts')).probe(section, timeoutMs),
  onboard: async (ask) => (await import('./onboard.ts')).onboard(ask),
});
