/**
 * What a session registers with: the options irc-framework is told when it connects — the
 * server, TLS (port 6697 by default, else 6667), the server password and SASL PLAIN, with its
 * own reconnecting and PING timeouts off, because the channel supervisor restarts a session and
 * the session sends its own PINGs — and the alternate nicks tried while ours is taken.
 */
import type { ClientOptions } from 'irc-framework';
import type { IrcConfig } from './config.ts';

export function connectOptions(config: IrcConfig, username: string, realname: string): ClientOptions {
  const tls = config.tls;
  return {
    host: config.host,
    port: config.port ?? (tls ? 6697 : 6667),
    tls,
    nick: config.nick,
    username,
    gecos: realname,
    ...(config.password === undefined ? {} : { password: config.password }),
    // an empty account keeps irc-framework from using the server password for SASL
    account: config.sasl ? { account: config.sasl.user, password: config.sasl.password } : {},
    sasl_disconnect_on_fail: true,
    auto_reconnect: false,
    ping_interval: 0,
    ping_timeout: 0,
    version: 'Switchboard',
    encoding: 'utf8',
  };
}

/** The n-th alternate nick: nick_, nick__, nick___, then nick plus digits. */
export function alternateNick(nick: string, attempt: number): string {
  if (attempt <= 3) return nick + '_'.repeat(attempt);
  return `${nick.slice(0, 12)}${Math.floor(Math.random() * 9000 + 1000)}`;
}
