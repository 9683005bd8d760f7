/** `switchboard doctor` for IRC: the server answers CAP LS on host / port / tls. */
import { checkGreeting, type CheckResult } from '../../src/setup/probe.ts';
import type { IrcConfig } from './config.ts';

export async function probe(irc: IrcConfig, timeoutMs: number): Promise<CheckResult[]> {
  return [await checkGreeting('channel irc', { host: irc.host, port: irc.port ?? (irc.tls ? 6697 : 6667), tls: irc.tls }, 'CAP LS 302\r\n', /./, timeoutMs, 'channels.irc host / port / tls')];
}
