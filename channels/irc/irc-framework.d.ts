/** The small part of irc-framework 4.14 (untyped CommonJS) this channel uses. */
declare module 'irc-framework' {
  import type { EventEmitter } from 'node:events';

  export interface ClientOptions {
    host: string;
    port: number;
    nick: string;
    username?: string;
    gecos?: string;
    tls?: boolean;
    rejectUnauthorized?: boolean;
    /** Server password (PASS). */
    password?: string;
    /** SASL PLAIN credentials; `{}` (no account) keeps the server password from being used for SASL. */
    account?: { account?: string; password?: string };
    sasl_disconnect_on_fail?: boolean;
    auto_reconnect?: boolean;
    ping_interval?: number;
    ping_timeout?: number;
    version?: string | null;
    encoding?: string;
    enable_echomessage?: boolean;
  }

  export interface IrcMessage {
    tags: Record<string, string | true>;
    prefix: string;
    nick: string;
    ident: string;
    hostname: string;
    command: string;
    params: string[];
  }

  export interface RawEvent {
    line: string;
    from_server: boolean;
  }

  export interface NetworkInfo {
    supports(feature: string): unknown;
    cap: { isEnabled(cap: string): boolean };
  }

  export class Client extends EventEmitter {
    constructor(options?: Partial<ClientOptions>);
    readonly connected: boolean;
    readonly network: NetworkInfo;
    readonly user: { nick: string; username: string; host: string };
    connect(options: ClientOptions): void;
    raw(line: string): void;
    quit(message?: string): void;
    changeNick(nick: string): void;
    join(channel: string, key?: string): void;
    say(target: string, message: string): void;
    ping(message?: string): void;
  }

  export function ircLineParser(line: string): IrcMessage | undefined;

  const irc: { Client: typeof Client; ircLineParser: typeof ircLineParser };
  export default irc;
}
