/** What `switchboard onboard` asks for Telegram, and the `[channels.telegram]` table it writes. */
import { allowLines, allowQuestion, askSecret, type ChannelTable, type Prompt } from '../../src/setup/onboard.ts';

export async function onboard(ask: Prompt): Promise<ChannelTable> {
  const token = await askSecret(ask, 'Telegram: environment variable for the bot token', 'TELEGRAM_BOT_TOKEN', 'talk to @BotFather, /newbot, copy the token');
  const allow = await ask.list(allowQuestion('Telegram: numeric user ids (ask @userinfobot)'), []);
  return { lines: [`token = "\${${token.env}}"`, ...allowLines(allow, '123456789')], secrets: [token] };
}
