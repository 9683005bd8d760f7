/**
 * The connection against a tiny scripted IRC server on 127.0.0.1: SASL PLAIN, the server
 * password, SASL failure, our own PING when the server goes quiet, and an ERROR from the server.
 * (ngircd, used by the end-to-end tests, has no SASL; a real SASL server needs services.)
 */
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { pino } from 'pino';
import type { ChannelContext, InboundMessage } from '../../src/channel.ts';
import type { IrcConfig } from './config.ts';
import { createIrcChannel, type IrcChannelOptions } from './index.ts';
import { parseChannels } from './membership.ts';
import { alternateNick } from './registration.ts';
import { testChannelState } from '../../test/support/channel-state.ts';

type Reply = (line: string) => void;

interface Scripted {
  readonly port: number;
  /** Lines the client sent, in order. */
  readonly lines: string[];
  close(): Promise<void>;
}

/** A server that answers each client line through `script` (called with a `send` for replies). */
async function scriptedServer(script: (line: string, send: Reply, socket: Socket) => void): Promise<Scripted> {
  const lines: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    let buffer = '';
    const send: Reply = (line) => void socket.write(`${line}\r\n`);
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('utf8');
      let end: number;
      while ((end = buffer.indexOf('\r\n')) !== -1) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        lines.push(line);
        script(line, send, socket);
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    lines,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Registration as a server with SASL would do it; `sasl` decides whether the credentials are accepted. */
function ircd(options: { sasl: 'accept' | 'reject' | 'none'; expectPlain?: string; silentAfterJoin?: boolean }) {
  return (line: string, send: Reply): void => {
    const [command, ...rest] = line.split(' ');
    switch (command) {
      case 'CAP':
        if (rest[0] === 'LS') send(`:irc.test CAP * LS :multi-prefix${options.sasl === 'none' ? '' : ' sasl=PLAIN'}`);
        else if (rest[0] === 'REQ') send(`:irc.test CAP * ACK :${rest.slice(1).join(' ').replace(/^:/, '')}`);
        else if (rest[0] === 'END') {
          send(':irc.test 001 switchboard :Welcome to the test network switchboard!~switchboa@127.0.0.1');
          send(':irc.test 005 switchboard CHANTYPES=# NICKLEN=30 :are supported by this server');
        }
        return;
      case 'AUTHENTICATE':
        if (rest[0] === 'PLAIN') return send('AUTHENTICATE +');
        if (options.sasl === 'accept' && rest[0] === options.expectPlain) {
          send(':irc.test 900 switchboard switchboard!~switchboa@127.0.0.1 sbuser :You are now logged in as sbuser');
          send(':irc.test 903 switchboard :SASL authentication successful');
        } else send(':irc.test 904 switchboard :SASL authentication failed');
        return;
      case 'JOIN':
        send(`:switchboard!~switchboa@127.0.0.1 JOIN ${rest[0]}`);
        if (!options.silentAfterJoin) send(`:alice!~alice@127.0.0.1 PRIVMSG ${rest[0]} :switchboard: hello from the script`);
        return;
      case 'PING':
        send(`:irc.test PONG irc.test :${rest.join(' ').replace(/^:/, '')}`);
        return;
    }
  };
}

const config = (port: number, over: Partial<IrcConfig> = {}): IrcConfig => ({
  host: '127.0.0.1',
  port,
  tls: false,
  nick: 'switchboard',
  channels: ['#room'],
  rejoin_on_kick: true,
  lines_per_second: 5,
  mention_only: true,
  ...over,
});

const ctx: ChannelContext = { name: 'irc', log: pino({ level: 'silent' }), assistantName: 'Testbot', attachments: { maxBytes: 0, save: () => Promise.reject(new Error('no files')) }, state: testChannelState(), stateDir: '' };

async function run(server: Scripted, over: Partial<IrcConfig>, options: IrcChannelOptions = {}) {
  const channel = createIrcChannel(config(server.port, over), ctx, options);
  const abort = new AbortController();
  const pushed: InboundMessage[] = [];
  const counts = { ready: 0, alive: 0 };
  const listening = channel.listen(
    async (message) => {
      pushed.push(message);
      return 'accepted';
    },
    abort.signal,
    { ready: () => void counts.ready++, alive: () => void counts.alive++, deaf: () => undefined },
  );
  listening.catch(() => undefined);
  return { channel, abort, pushed, counts, listening };
}

async function until(condition: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('irc session helpers', () => {
  it('parses channel keys and makes alternate nicks', () => {
    assert.deepEqual(parseChannels(['#open', ' #locked  s3cret ']), [{ name: '#open' }, { name: '#locked', key: 's3cret' }]);
    assert.deepEqual([1, 2, 3].map((n) => alternateNick('bot', n)), ['bot_', 'bot__', 'bot___']);
    assert.match(alternateNick('a-very-long-nickname', 4), /^a-very-long-\d{4}$/);
  });
});

describe('irc connection (scripted server)', () => {
  let server: Scripted | undefined;
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    await server?.close();
    stop = server = undefined;
  });

  it('authenticates with SASL PLAIN and sends the server password before registering', async () => {
    const plain = Buffer.from('sbuser\0sbuser\0sasl-secret').toString('base64');
    server = await scriptedServer(ircd({ sasl: 'accept', expectPlain: plain }));
    const bot = await run(server, { password: 'server-secret', sasl: { user: 'sbuser', password: 'sasl-secret' } });
    stop = async () => {
      bot.abort.abort();
      await bot.listening;
    };
    await until(() => bot.counts.ready === 1 && bot.pushed.length === 1, 'ready and the first message');
    const sent = server.lines;
    const index = (prefix: string): number => sent.findIndex((line) => line.startsWith(prefix));
    assert.ok(index('PASS server-secret') !== -1, 'PASS sent');
    assert.ok(index('PASS') < index('NICK') && index('NICK') < index('USER'), 'PASS, then NICK and USER');
    assert.ok(index('AUTHENTICATE PLAIN') < index('CAP END'), 'SASL before the end of capability negotiation');
    assert.equal(sent[index('AUTHENTICATE PLAIN') + 1], `AUTHENTICATE ${plain}`);
    assert.ok(index('JOIN #room') > index('CAP END'));
    assert.equal(bot.pushed[0]!.text, 'hello from the script');
  });

  it('never offers the server password over SASL when no SASL account is configured', async () => {
    server = await scriptedServer(ircd({ sasl: 'accept' }));
    const bot = await run(server, { password: 'server-secret' });
    stop = async () => {
      bot.abort.abort();
      await bot.listening;
    };
    await until(() => bot.counts.ready === 1, 'ready');
    assert.equal(
      server.lines.some((line) => line.startsWith('AUTHENTICATE')),
      false,
    );
  });

  it('gives up the connection when SASL fails (the supervisor retries with backoff)', async () => {
    server = await scriptedServer(ircd({ sasl: 'reject' }));
    const bot = await run(server, { sasl: { user: 'sbuser', password: 'wrong' } });
    await assert.rejects(bot.listening, /SASL authentication failed/);
    assert.equal(bot.counts.ready, 0);
  });

  it('sends a PING of its own when the server is silent, and counts the PONG as life', async () => {
    server = await scriptedServer(ircd({ sasl: 'none', silentAfterJoin: true }));
    const bot = await run(server, {}, { pingAfterMs: 150 });
    stop = async () => {
      bot.abort.abort();
      await bot.listening;
    };
    await until(() => bot.counts.ready === 1, 'ready');
    const alive = bot.counts.alive;
    await until(() => server!.lines.filter((line) => line.startsWith('PING :keepalive')).length >= 2, 'two keepalive PINGs', 3000);
    await until(() => bot.counts.alive > alive, 'the PONG counted as life');
    assert.equal(bot.channel.livenessTimeoutMs, 150_000);
  });

  it('ends the listen with the server’s reason when it closes the link', async () => {
    server = await scriptedServer((line, send, socket) => {
      if (line.startsWith('USER')) {
        send('ERROR :Closing Link: 127.0.0.1 (K-Lined)');
        socket.end();
      }
    });
    const bot = await run(server, {});
    await assert.rejects(bot.listening, /closed: Closing Link: 127\.0\.0\.1 \(K-Lined\)/);
  });

  it('returns promptly when stopped, even before it registered', async () => {
    server = await scriptedServer(() => undefined); // accepts, never answers
    const bot = await run(server, {});
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    bot.abort.abort();
    await bot.listening;
    assert.ok(Date.now() - started < 2000);
  });
});
