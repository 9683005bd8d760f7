/** What `switchboard onboard` asks for the webhook, and the `[channels.webhook]` table it writes. */
import { askSecret, list, type ChannelTable, type Prompt } from '../../src/setup/onboard.ts';

export async function onboard(ask: Prompt): Promise<ChannelTable> {
  const key = await askSecret(ask, 'Webhook: environment variable for the signing secret', 'WEBHOOK_SECRET', 'any long random string: openssl rand -hex 32; callers sign each body with it');
  const allow = await ask.list('Webhook: sender ids that may talk, comma-separated (* = any caller that signs)', ['*']);
  return { lines: [`secret = "\${${key.env}}"`, `allow = ${list(allow)}`], secrets: [key] };
}
