/** The terminal channel as one unit: what channels/registry.ts lists (see src/channel-module.ts). */
import { userInfo } from 'node:os';
import { defineChannel } from '../../src/channel-module.ts';
import { TerminalSchema } from './config.ts';

export const terminal = defineChannel({
  name: 'terminal',
  schema: TerminalSchema,
  docs: 'docs/channels/terminal.md',
  create: async (section, { config, mode, finish, interrupt }) =>
    (await import('./index.ts')).createTerminalChannel({
      input: process.stdin,
      output: process.stdout,
      // `chat` talks through the terminal whether or not the file has a [channels.terminal] table.
      user: (section as typeof section | undefined)?.user ?? safeUsername(),
      assistantName: config.agent.name,
      interactive: process.stdin.isTTY === true,
      banner: `Talking to ${config.agent.name} (${config.provider.model}) · /help lists the commands · Ctrl-D or Ctrl-C quits`,
      onInterrupt: interrupt,
      ...(mode === 'chat' ? { onEnd: finish } : {}),
    }),
  // Nothing to reach: the terminal is this process's stdin and stdout.
  onboard: async (ask) => (await import('./onboard.ts')).onboard(ask),
});

function safeUsername(): string {
  try {
    return userInfo().username || 'local';
  } catch {
    return 'local';
  }
}
