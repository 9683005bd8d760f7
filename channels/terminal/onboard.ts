/** What `switchboard onboard` asks for the terminal (nothing), and the `[channels.terminal]` table it writes. */
import type { ChannelTable, Prompt } from '../../src/setup/onboard.ts';

export function onboard(_ask: Prompt): Promise<ChannelTable> {
  return Promise.resolve({ lines: ['# The person at the terminal; default: your OS user name.', '# user = "alice"'], secrets: [] });
}
