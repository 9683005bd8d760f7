/** The webhook channel as one unit: what channels/registry.ts lists (see src/channel-module.ts). */
import { defineChannel } from '../../src/channel-module.ts';
import { WebhookSchema } from './config.ts';

export const webhook = defineChannel({
  name: 'webhook',
  schema: WebhookSchema,
  docs: 'docs/channels/webhook.md',
  create: async (section, { context }) => (await import('./index.ts')).createWebhookChannel(section, context),
  onboard: async (ask) => (await import('./onboard.ts')).onboard(ask),
});
