/** What `switchboard onboard` asks for IRC, and the `[channels.irc]` table it writes. */
import { field, allowLines, allowQuestion, list, q, type ChannelTable, type Prompt } from '../../src/setup/onboard.ts';
import { IrcSchema } from './config.ts';

export async function onboard(ask: Prompt): Promise<ChannelTable> {
  const host = await ask.text('IRC: server', 'irc.libera.chat', field(IrcSchema, 'host'));
  const tls = await ask.yes('IRC: TLS', true);
  const port = await ask.text('IRC: port', tls ? '6697' : '6667', (a) => (/^\d{1,5}$/.test(a) && Number(a) >= 1 && Number(a) <= 65_535 ? undefined : 'a port number 1–65535'));
  const nick = await ask.text('IRC: nick', 'switchboard', field(IrcSchema, 'nick'));
  const channels = await ask.list('IRC: channels to join, comma-separated (empty = none; private messages are answered anyway)', [], (a) => (/^[#&]\S+( \S+)?$/.test(a) ? undefined : 'a channel name like #switchboard'));
  const allow = await ask.list(allowQuestion('IRC: nicks or nick!user@host masks'), []);
  return {
    lines: [
      `host = ${q(host)}`,
      `port = ${Number(port)}`,
      `tls = ${tls}`,
      `nick = ${q(nick)}`,
      ...(channels.length > 0 ? [`channels = ${list(channels)}`] : []),
      '# SASL, a server password or NickServ: see switchboard.example.toml.',
      ...allowLines(allow, 'alice'),
    ],
    secrets: [],
  };
}
