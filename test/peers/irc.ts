/**
 * The IRC peer: a real IRC server (ngircd, see ircd.ts) with three people on it — alice, bob
 * and mallory, irc-framework clients in the test channel — and a transparent TCP relay in
 * front of the server for the bot, which records what the bot wrote.
 *
 * IRC has lines, not messages: a reply part the bot sends becomes one PRIVMSG per line. The
 * peer counts one `send` of the channel as one bot message — the lines written between two of
 * the delivery PINGs the channel sends after each part (`PING :sbd…`, seen by the relay) —
 * and reports it once every one of its lines has reached the person (or the channel), as
 * that person's client received them. Its `limit` is therefore the channel's reply-part
 * length, not the 512-byte line (each relayed line's size is recorded too: see `lines`).
 *
 * Faults: `server.restart()` (ngircd killed and started again — every connection drops),
 * `dropBot()` (only the bot's connection is cut), `kickBot()`, `impostor(nick)` (someone
 * holds the bot's nick).
 */
import { Client, ircLineParser, type ClientOptions } from 'irc-framework';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { BotMessage, ChatPeer, PeerUser, Place } from '../contracts/chat-channel.ts';
import { startNgircd, type Ngircd } from './ircd.ts';

export const IRC_CHANNEL = '#Switchboard';
export const BOT_NICK = 'switchboard';
/** The channel's reply-part length (IRC_REPLY_PART in channels/irc/index.ts). */
const REPLY_PART = 2000;

/** A line the bot sent that a person received, as relayed by the server. */
export interface RelayedLine {
  readonly text: string;
  /** Bytes of the whole line as the server relayed it, CR LF included. */
  readonly bytes: number;
  readonly at: number;
}

/** What the relay saw the bot write for one `send`: PRIVMSG lines to one target, then a delivery PING. */
interface BotSend {
  readonly target: string;
  readonly lines: string[];
  /** The delivery PING came (the send is complete on the bot's side). */
  closed: boolean;
  /** The connection ended before the delivery PING. */
  aborted: boolean;
}

export interface PersonClient {
  readonly nick: string;
  readonly client: Client;
  /** Texts of PRIVMSGs and NOTICEs sent to this nick, with the sender. */
  readonly inbox: Array<{ from: string; text: string; notice: boolean }>;
  /** Resolves once the server has processed everything this client sent. */
  sync(): Promise<void>;
  quit(): Promise<void>;
}

export interface IrcPeerStats {
  /** Connections the bot made through the relay. */
  botConnections: number;
  /** Times the bot joined the test channel. */
  botJoins: number;
  /** The bot's QUIT / ERROR reasons as seen by people. */
  botQuits: string[];
  /** Sends cut short by a lost connection. */
  abortedSends: number;
  /** When the server last confirmed the bot joined the test channel (ms since the epoch, seen by the relay). */
  lastBotJoinAt: number;
}

export interface IrcPeer extends ChatPeer {
  readonly server: Ngircd;
  /** Port of the relay the bot connects to. */
  readonly port: number;
  /** The bot's nick right now (maybe an alternate). */
  readonly botNick: string;
  readonly stats: IrcPeerStats;
  /** Bot messages to a place that the bot finished sending but whose lines have not all arrived yet. */
  inTransit(place: Place): number;
  /** Every bot line that reached a place, in order. */
  lines(place: Place): readonly RelayedLine[];
  /** Whether the bot is in the test channel now (as the people see it). */
  botInChannel(): boolean;
  /** Cuts the bot's connection (the server stays up). */
  dropBot(): void;
  /** Kills (SIGKILL) and restarts the server; the people reconnect and rejoin. Returns when it was killed and when it listened again. */
  restartServer(): Promise<{ killedAt: number; listeningAt: number }>;
  /** alice (a channel operator) sets a channel mode, e.g. "+n" (no messages from outside). */
  channelMode(mode: string): Promise<void>;
  /** alice (a channel operator) kicks the bot. */
  kickBot(reason?: string): Promise<void>;
  /** Another client connects with `nick` (and joins the channel when asked). */
  connectPerson(nick: string, options?: { join?: boolean }): Promise<PersonClient>;
  /** Resolves once nobody uses `nick` on the server (a quit bot's connection can linger while the server drains it). */
  nickFree(nick: string, timeoutMs?: number): Promise<void>;
  /** Resolves when `condition` holds (polling), or rejects after `timeoutMs`. */
  until(condition: () => boolean, what: string, timeoutMs?: number): Promise<void>;
}

const PEOPLE: readonly PeerUser[] = ['alice', 'bob', 'mallory'];
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const lower = (text: string): string => text.replace(/[A-Z]+/g, (s) => s.toLowerCase());
let syncCounter = 0;

/** Connects an irc-framework client; resolves once registered (and joined, if asked). */
async function connectClient(port: number, nick: string, join: string | undefined): Promise<PersonClient> {
  const client = new Client();
  const inbox: PersonClient['inbox'] = [];
  const options: ClientOptions = { host: '127.0.0.1', port, nick, username: nick.slice(0, 9), gecos: nick, auto_reconnect: false, ping_interval: 0, ping_timeout: 0 };
  const registered = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${nick} did not register on the IRC server`)), 10_000);
    client.once('registered', () => {
      clearTimeout(timer);
      resolve();
    });
    client.once('close', () => reject(new Error(`${nick}'s connection closed during registration`)));
  });
  client.on('privmsg', (event: { nick: string; target: string; message: string }) => {
    if (lower(event.target) === lower(client.user.nick)) inbox.push({ from: event.nick, text: event.message, notice: false });
  });
  client.on('notice', (event: { nick: string; target: string; message: string }) => {
    if (lower(event.target) === lower(client.user.nick)) inbox.push({ from: event.nick, text: event.message, notice: true });
  });
  client.on('ctcp response', (event: { nick: string; target: string; message: string }) => {
    if (lower(event.target) === lower(client.user.nick)) inbox.push({ from: event.nick, text: `\x01${event.message}\x01`, notice: true });
  });
  // the nick may still be held by a connection that is just closing (a bot that quit): try again
  let registering = true;
  client.on('nick in use', () => {
    if (registering) setTimeout(() => client.changeNick(nick), 200);
  });
  client.connect(options);
  await registered.finally(() => (registering = false));
  const person: PersonClient = {
    nick,
    client,
    inbox,
    sync: () =>
      new Promise<void>((resolve, reject) => {
        const token = `sync${++syncCounter}`;
        const timer = setTimeout(() => {
          client.off('pong', onPong);
          reject(new Error(`${nick}: the server did not answer a PING`));
        }, 15_000);
        const onPong = (event: { message: string }): void => {
          if (event.message !== token) return;
          clearTimeout(timer);
          client.off('pong', onPong);
          resolve();
        };
        client.on('pong', onPong);
        client.raw(`PING :${token}`);
      }),
    quit: () =>
      new Promise<void>((resolve) => {
        if (!client.connected) return resolve();
        const timer = setTimeout(resolve, 1000);
        client.once('close', () => {
          clearTimeout(timer);
          resolve();
        });
        client.quit('bye');
      }),
  };
  if (join) await joinChannel(person, join);
  return person;
}

export interface IrcPeerOptions {
  /** The server also listens with TLS (server.tlsPort, a self-signed server.certificate). */
  readonly tls?: boolean;
}

/** Joins `channel`; resolves once the server confirms it. */
async function joinChannel(person: PersonClient, channel: string): Promise<void> {
  const joined = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${person.nick} could not join ${channel}`)), 10_000);
    const onJoin = (event: { nick: string; channel: string }): void => {
      if (lower(event.nick) !== lower(person.nick) || lower(event.channel) !== lower(channel)) return;
      clearTimeout(timer);
      person.client.off('join', onJoin);
      resolve();
    };
    person.client.on('join', onJoin);
  });
  person.client.join(channel);
  await joined;
}

export async function startIrcPeer(options: IrcPeerOptions = {}): Promise<IrcPeer> {
  const server = await startNgircd({ tls: options.tls ?? false });
  const people = new Map<PeerUser, PersonClient>();
  const received = new Map<string, RelayedLine[]>(); // place key → lines the person (or channel) got
  let sends: BotSend[] = [];
  const botNicks = new Set<string>([lower(BOT_NICK)]);
  let botNick = BOT_NICK;
  let botInChannel = false;
  const stats: IrcPeerStats = { botConnections: 0, botJoins: 0, botQuits: [], abortedSends: 0, lastBotJoinAt: 0 };
  const sockets = new Set<Socket>();

  const placeKey = (place: Place): string => (place.kind === 'dm' ? `dm:${place.user}` : place.kind === 'group' ? 'group' : 'thread');
  const record = (key: string, line: RelayedLine): void => {
    const list = received.get(key) ?? [];
    list.push(line);
    received.set(key, list);
  };

  /** Watches one person's connection: the bot's lines to the channel (alice) or to this person. */
  const watch = (user: PeerUser, person: PersonClient): void => {
    person.client.on('raw', (event: { line: string; from_server: boolean }) => {
      if (!event.from_server) return;
      const line = event.line.replace(/\r?\n$/, '');
      const msg = ircLineParser(line);
      if (!msg) return;
      // RPL_NAMREPLY (RFC 2812 5.1), from the server: "<me> <type> <channel> :[@|+]nick …" — who is
      // in the channel already; a bot that joined before alice was watched shows here, not as a JOIN.
      if (user === 'alice' && msg.command === '353' && lower(msg.params[2] ?? '') === lower(IRC_CHANNEL)) {
        if ((msg.params[3] ?? '').split(' ').some((name) => botNicks.has(lower(name.replace(/^[@+%&~]+/, ''))))) botInChannel = true;
        return;
      }
      if (msg.nick === '') return;
      const fromBot = botNicks.has(lower(msg.nick));
      const [first = '', second = ''] = msg.params;
      if (msg.command === 'PRIVMSG' && fromBot) {
        const relayed = { text: second, bytes: Buffer.byteLength(line, 'utf8') + 2, at: Date.now() };
        if (lower(first) === lower(IRC_CHANNEL)) {
          if (user === 'alice') record('group', relayed);
        } else if (lower(first) === lower(person.nick)) record(`dm:${user}`, relayed);
        return;
      }
      if (user !== 'alice') return;
      if (msg.command === 'JOIN' && fromBot) {
        botInChannel = true;
        stats.botJoins++;
      } else if (msg.command === 'PART' && fromBot) botInChannel = false;
      else if (msg.command === 'QUIT' && fromBot) {
        botInChannel = false;
        stats.botQuits.push(first);
      } else if (msg.command === 'KICK' && botNicks.has(lower(second))) botInChannel = false;
    });
  };

  const connectPeople = async (): Promise<void> => {
    // everyone registers at once; alice joins first, so she is the channel's operator
    const connected = await Promise.all(PEOPLE.map((user) => connectClient(server.port, user, undefined)));
    const joinAll = async (index: number): Promise<void> => joinChannel(connected[index]!, IRC_CHANNEL);
    await joinAll(0);
    await Promise.all([joinAll(1), joinAll(2)]);
    PEOPLE.forEach((user, index) => {
      watch(user, connected[index]!);
      people.set(user, connected[index]!);
    });
    // The bot may have joined before alice was watched (after a server restart it reconnects on
    // its own): ask who is there now.
    connected[0]!.client.raw(`NAMES ${IRC_CHANNEL}`);
    await connected[0]!.sync();
  };
  await connectPeople();

  // the relay: bot ⇄ relay ⇄ ngircd, reading what the bot writes and the nick the server gives it
  const relay: Server = createServer((downstream) => {
    stats.botConnections++;
    const upstream = connect(server.port, '127.0.0.1');
    sockets.add(downstream);
    sockets.add(upstream);
    let fromBot = '';
    let fromServer = '';
    const close = (): void => {
      downstream.destroy();
      upstream.destroy();
      sockets.delete(downstream);
      sockets.delete(upstream);
      const open = sends.at(-1);
      if (open && !open.closed && !open.aborted) {
        open.aborted = true;
        stats.abortedSends++;
      }
    };
    downstream.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      fromBot += chunk.toString('utf8');
      let end: number;
      while ((end = fromBot.indexOf('\n')) !== -1) {
        botLine(fromBot.slice(0, end).replace(/\r$/, ''));
        fromBot = fromBot.slice(end + 1);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      downstream.write(chunk);
      fromServer += chunk.toString('utf8');
      let end: number;
      while ((end = fromServer.indexOf('\n')) !== -1) {
        serverLine(fromServer.slice(0, end).replace(/\r$/, ''));
        fromServer = fromServer.slice(end + 1);
      }
    });
    downstream.on('close', close);
    upstream.on('close', close);
    downstream.on('error', close);
    upstream.on('error', close);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const relayPort = (relay.address() as { port: number }).port;

  function botLine(line: string): void {
    const privmsg = /^PRIVMSG (\S+) :?(.*)$/.exec(line);
    if (privmsg) {
      const [, target, text] = privmsg as unknown as [string, string, string];
      const open = sends.at(-1);
      if (open && !open.closed && !open.aborted && lower(open.target) === lower(target)) open.lines.push(text);
      else sends.push({ target, lines: [text], closed: false, aborted: false });
      return;
    }
    if (/^PING :?sbd/.test(line)) {
      const open = sends.at(-1);
      if (open && !open.aborted) open.closed = true;
    }
  }

  function serverLine(line: string): void {
    const welcome = /^(?:@\S+ )?:\S+ 001 (\S+)/.exec(line);
    if (welcome) {
      botNick = welcome[1]!;
      botNicks.add(lower(botNick));
      return;
    }
    const join = /^(?:@\S+ )?:([^!\s]+)!\S+ JOIN :?(\S+)/.exec(line);
    if (join && lower(join[1]!) === lower(botNick) && lower(join[2]!) === lower(IRC_CHANNEL)) {
      stats.lastBotJoinAt = Date.now();
      return;
    }
    const nick = /^(?:@\S+ )?:([^!\s]+)!\S+ NICK :?(\S+)/.exec(line);
    if (nick && lower(nick[1]!) === lower(botNick)) {
      botNick = nick[2]!;
      botNicks.add(lower(botNick));
    }
  }

  /** The target a place's bot lines go to. */
  const targetOf = (place: Place): string => (place.kind === 'dm' ? place.user : place.kind === 'group' ? IRC_CHANNEL : '');

  function inTransit(place: Place): number {
    const target = lower(targetOf(place));
    return sends.filter((send) => lower(send.target) === target && send.closed && !send.aborted).length - botMessages(place).length;
  }

  function botMessages(place: Place): BotMessage[] {
    const got = received.get(placeKey(place)) ?? [];
    const target = lower(targetOf(place));
    const messages: BotMessage[] = [];
    let next = 0;
    for (const send of sends) {
      if (lower(send.target) !== target) continue;
      let matched = 0;
      while (matched < send.lines.length && next + matched < got.length && got[next + matched]!.text === send.lines[matched]) matched++;
      if (send.aborted) {
        next += matched; // whatever got through before the connection was lost; not a whole message
        continue;
      }
      if (!send.closed || matched < send.lines.length) break; // still arriving
      messages.push({ text: send.lines.join('\n'), edits: 0 });
      next += matched;
    }
    return messages;
  }

  const person = (user: PeerUser): PersonClient => {
    const found = people.get(user);
    if (!found) throw new Error(`${user} is not connected`);
    return found;
  };

  const peer: IrcPeer = {
    channel: 'irc',
    limit: REPLY_PART,
    users: { alice: 'alice', bob: 'bob', mallory: 'mallory' },
    hasTyping: false,
    server,
    port: relayPort,
    get botNick() {
      return botNick;
    },
    stats,

    configSection() {
      return [
        '[channels.irc]',
        'host = "127.0.0.1"',
        `port = ${relayPort}`,
        'tls = false',
        `nick = "${BOT_NICK}"`,
        `channels = ["${IRC_CHANNEL}"]`,
        'lines_per_second = 3',
        '',
      ].join('\n');
    },

    async post(user, place, text, options = {}) {
      const from = person(user);
      if (place.kind === 'thread') throw new Error('IRC has no threads');
      if (place.kind === 'dm') from.client.say(botNick, text);
      else from.client.say(IRC_CHANNEL, options.mention ? `${botNick}: ${text}` : text);
      await from.sync(); // the server has relayed it
    },

    async postFile() {
      throw new Error('IRC has no files');
    },

    botMessages,
    inTransit,
    botFiles: () => [],
    typing: () => 0,
    lines: (place) => received.get(placeKey(place)) ?? [],
    botInChannel: () => botInChannel,

    reset() {
      received.clear();
      sends = [];
      stats.botQuits.length = 0;
      stats.abortedSends = 0;
    },

    dropBot() {
      for (const socket of sockets) socket.destroy();
    },

    async restartServer() {
      for (const p of people.values()) p.client.removeAllListeners('raw');
      people.clear();
      botInChannel = false;
      const killedAt = Date.now();
      await server.restart('SIGKILL');
      const listeningAt = Date.now();
      await connectPeople();
      return { killedAt, listeningAt };
    },

    async channelMode(mode) {
      const alice = person('alice');
      alice.client.raw(`MODE ${IRC_CHANNEL} ${mode}`);
      await alice.sync();
    },

    async kickBot(reason = 'out you go') {
      const alice = person('alice');
      alice.client.raw(`KICK ${IRC_CHANNEL} ${botNick} :${reason}`);
      await alice.sync();
    },

    async connectPerson(nick, options = {}) {
      return connectClient(server.port, nick, options.join ? IRC_CHANNEL : undefined);
    },

    async nickFree(nick, timeoutMs = 20_000) {
      const alice = person('alice');
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const online = await new Promise<string>((resolve) => {
          const onRaw = (event: { line: string; from_server: boolean }): void => {
            const reply = /^:\S+ 303 \S+ :?(.*)$/.exec(event.line.replace(/\r?\n$/, ''));
            if (!event.from_server || !reply) return;
            alice.client.off('raw', onRaw);
            resolve(reply[1]!.trim());
          };
          alice.client.on('raw', onRaw);
          alice.client.raw(`ISON ${nick}`);
        });
        if (!online.split(' ').some((n) => lower(n) === lower(nick))) return;
        if (Date.now() > deadline) throw new Error(`${nick} is still online`);
        await sleep(200);
      }
    },

    async until(condition, what, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (!condition()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\nserver log:\n${server.log().slice(-3000)}`);
        await sleep(20);
      }
    },

    async close() {
      await Promise.all([...people.values()].map((p) => p.quit()));
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => relay.close(() => resolve()));
      await server.close();
    },
  };
  return peer;
}
