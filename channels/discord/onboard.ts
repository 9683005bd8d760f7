/** What `switchboard onboard` asks for Discord, and the `[channels.discord]` table it writes. */
import { allowLines, allowQuestion, askSecret, type ChannelTable, type Prompt } from '../../src/setup/onboard.ts';

export async function onboard(ask: Prompt): Promise<ChannelTable> {
  const token = await askSecret(ask, 'Discord: environment variable for the bot token', 'DISCORD_BOT_TOKEN', 'Developer Portal → Bot → Reset Token; enable the Message Content intent');
  const allow = await ask.list(allowQuestion('Discord: user ids (Developer Mode → Copy User ID)'), []);
  return { lines: [`token = "\${${token.env}}"`, ...allowLines(allow, '80351110224678912')], secrets: [token] };
}
