import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { Attachment, AttachmentInput, InboundMessage } from '../../src/channel.ts';
import type { SlackWebClient } from './app.ts';
import { BotThreads, Intake } from './receive.ts';

const identity = { userId: 'U0BOT', botId: 'B0BOT', teamId: 'T1', names: ['testbot'] };

function setup(options: { replies?: Array<{ user?: string; bot_id?: string }>; origins?: (url: URL) => boolean; maxWaiting?: number } = {}) {
  const calls: string[] = [];
  const tokens: Array<string | undefined> = [];
  const web = {
    users: {
      info: async ({ user, token }: { user: string; token?: string }) => {
        tokens.push(token);
        calls.push(`users.info ${user}`);
        return { ok: true, user: { id: user, name: user.toLowerCase(), profile: { display_name: `name-${user}` } } };
      },
    },
    conversations: {
      replies: async ({ channel, ts, token }: { channel: string; ts: string; token?: string }) => {
        tokens.push(token);
        calls.push(`conversations.replies ${channel} ${ts}`);
        return { ok: true, messages: options.replies ?? [] };
      },
    },
  } as unknown as SlackWebClient;
  const saved: AttachmentInput[] = [];
  const pushed: InboundMessage[] = [];
  const receiver = new Intake({
    channel: 'slack',
    identity,
    web,
    botToken: 'xoxb-secret',
    fileOrigins: options.origins ?? (() => true),
    attachments: {
      maxBytes: 1000,
      async save(input): Promise<Attachment> {
        saved.push(input);
        try {
          const data = await input.download(AbortSignal.timeout(5000));
          const chunks: Uint8Array[] = [];
          if (data instanceof Uint8Array) chunks.push(data);
          else for await (const chunk of data) chunks.push(chunk);
          return { kind: input.kind, name: input.name ?? 'x', size: Buffer.concat(chunks).length, path: `inbox/${Buffer.concat(chunks).toString()}` };
        } catch (error) {
          return { kind: input.kind, name: input.name ?? 'x', size: 0, note: String(error) };
        }
      },
    },
    threads: new BotThreads(),
    log: pino({ level: 'silent' }),
    ...(options.maxWaiting === undefined ? {} : { maxWaiting: options.maxWaiting }),
  });
  const push = async (message: InboundMessage) => {
    pushed.push(message);
    return 'accepted' as const;
  };
  return { receiver, push, pushed, calls, tokens, saved };
}

const message = (fields: Record<string, unknown>) => ({ type: 'message', channel: 'C1', channel_type: 'channel', user: 'U0ALICE', text: 'hi', ts: '100.000001', ...fields });

describe('slack intake', () => {
  it('pushes the message and app_mention events of one mention once, with the sender\'s name', async () => {
    const { receiver, push, pushed, calls } = setup();
    await receiver.handle(message({ text: '<@U0BOT> hi' }), push);
    await receiver.handle({ type: 'app_mention', channel: 'C1', user: 'U0ALICE', text: '<@U0BOT> hi', ts: '100.000001' }, push);
    await receiver.handle(message({ text: '<@U0BOT> hi' }), push); // a redelivery
    assert.equal(pushed.length, 1);
    assert.deepEqual(pushed[0]!.sender, { id: 'U0ALICE', name: 'name-U0ALICE' });
    await receiver.handle(message({ ts: '100.000002', text: 'again' }), push);
    assert.equal(calls.filter((c) => c.startsWith('users.info')).length, 1, 'names are cached');
  });

  it('ignores events that are not messages, and pushes nothing for bots', async () => {
    const { receiver, push, pushed } = setup();
    await receiver.handle({ type: 'reaction_added', user: 'U0ALICE' }, push);
    await receiver.handle(message({ bot_id: 'B9', user: 'U9' }), push);
    await receiver.handle(undefined, push);
    assert.equal(pushed.length, 0);
  });

  it('a thread the bot posted in (seen by its own echo) addresses the messages in it', async () => {
    const { receiver, push, pushed, calls } = setup();
    await receiver.handle(message({ user: 'U0BOT', bot_id: 'B0BOT', ts: '100.000005', thread_ts: '100.000001' }), push);
    await receiver.handle(message({ ts: '100.000006', thread_ts: '100.000001', text: 'follow-up' }), push);
    assert.equal(pushed[0]!.addressed, true);
    assert.equal(pushed[0]!.thread, '100.000001');
    assert.deepEqual(calls.filter((c) => c.startsWith('conversations')), [], 'no lookup needed');
  });

  it('asks Slack once whether the bot is in a thread it has not seen since start', async () => {
    const { receiver, push, pushed, calls, tokens } = setup({ replies: [{ user: 'U0ALICE' }, { user: 'U0BOT', bot_id: 'B0BOT' }] });
    await receiver.handle(message({ ts: '100.000006', thread_ts: '100.000001', text: 'one' }), push);
    await receiver.handle(message({ ts: '100.000007', thread_ts: '100.000001', text: 'two' }), push);
    assert.deepEqual(pushed.map((m) => m.addressed), [true, true]);
    assert.deepEqual(calls.filter((c) => c.startsWith('conversations')), ['conversations.replies C1 100.000001']);
    assert.ok(tokens.length > 0 && tokens.every((t) => t === 'xoxb-secret'), 'every Web API call carries the bot token (app.client has none)');
    const other = setup({ replies: [{ user: 'U0ALICE' }] });
    await other.receiver.handle(message({ ts: '100.000006', thread_ts: '100.000001', text: 'one' }), other.push);
    assert.equal(other.pushed[0]!.addressed, false);
  });

  it('holds at most maxWaiting events while push waits, refusing the rest for Slack to deliver again', async () => {
    const { receiver } = setup({ maxWaiting: 20 });
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const pushed: string[] = [];
    const slowPush = async (m: InboundMessage) => (await blocked, pushed.push(m.id), 'accepted' as const);
    const taken: Array<Promise<void>> = [];
    let refused = 0;
    for (let i = 0; i < 10_000; i++) {
      const handled = receiver.handle(message({ channel: `C${i % 5}`, ts: `100.${String(i).padStart(6, '0')}`, text: `m${i}` }), slowPush);
      if (receiver.waiting > 20) assert.fail(`${receiver.waiting} events waiting`);
      taken.push(handled.catch((error: unknown) => void (refused++, assert.match(String(error), /20 Slack events are waiting for the runtime/))));
    }
    release();
    await Promise.all(taken);
    assert.deepEqual([pushed.length, refused, receiver.waiting], [20, 9980, 0]);
    // Room again: a redelivery is taken.
    await receiver.handle(message({ channel: 'C1', ts: '100.999999', text: 'again' }), slowPush);
    assert.equal(pushed.length, 21);
  });

  it('rejects when push rejects, and pushes a redelivery after that', async () => {
    const { receiver, push, pushed } = setup();
    await assert.rejects(receiver.handle(message({}), async () => Promise.reject(new Error('shutting down'))));
    await receiver.handle(message({}), push);
    assert.equal(pushed.length, 1);
  });

  it('keeps a chat\'s order while a file downloads, and sends the bot token only where allowed', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const auth: string[] = [];
    const server = createServer((req, res) => {
      auth.push(req.headers.authorization ?? '');
      void gate.then(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('bytes'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const { receiver, push, pushed } = setup({ origins: (url) => url.origin === base });
      const withFile = receiver.handle(
        message({ channel: 'D1', channel_type: 'im', subtype: 'file_share', text: '', files: [{ id: 'F1', name: 'a.txt', mimetype: 'text/plain', size: 5, url_private_download: `${base}/f` }, { id: 'F2', name: 'b.txt', url_private_download: 'https://evil.example/f' }] }),
        push,
      );
      const after = receiver.handle(message({ channel: 'D1', channel_type: 'im', ts: '100.000009', text: 'after the file' }), push);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(pushed.length, 0, 'the later message waits for the file');
      release();
      await Promise.all([withFile, after]);
      assert.deepEqual(pushed.map((m) => m.text), ['', 'after the file']);
      assert.equal(pushed[0]!.attachments![0]!.path, 'inbox/bytes');
      assert.match(pushed[0]!.attachments![1]!.note!, /refusing to send the bot token to evil\.example/);
      assert.deepEqual(auth, ['Bearer xoxb-secret']);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
