import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { Attachment, AttachmentInput, InboundMessage } from '../../src/channel.ts';
import type { SlackWebClient } from './app.ts';
import { BotThreads, Intake } from './intake.ts';
import type { ChannelState } from '../../src/store/channel-state.ts';
import { testChannelState } from '../../test/support/channel-state.ts';

const identity = { userId: 'U0BOT', botId: 'B0BOT', teamId: 'T1', names: ['testbot'] };

function setup(
  options: {
    replies?: Array<{ user?: string; bot_id?: string }>;
    /** conversations.replies fails this many times first (an HTTP 500) */
    repliesFail?: number;
    repliesError?: unknown;
    origins?: (url: URL) => boolean;
    maxWaiting?: number;
    journal?: ChannelState;
    files?: Record<string, Record<string, unknown>>;
  } = {},
) {
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
        if (failures-- > 0) throw options.repliesError ?? Object.assign(new Error('An HTTP protocol error occurred: statusCode = 500'), { code: 'slack_webapi_http_error', statusCode: 500 });
        return { ok: true, messages: options.replies ?? [] };
      },
    },
    files: {
      info: async ({ file, token }: { file: string; token?: string }) => {
        tokens.push(token);
        calls.push(`files.info ${file}`);
        const found = options.files?.[file];
        if (!found) throw Object.assign(new Error('An API error occurred: file_not_found'), { code: 'slack_webapi_platform_error', data: { ok: false, error: 'file_not_found' } });
        return { ok: true, file: found };
      },
    },
  } as unknown as SlackWebClient;
  let failures = options.repliesFail ?? 0;
  const journal = options.journal ?? testChannelState();
  const abort = new AbortController();
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
    journal,
    signal: abort.signal,
    retryMs: [5],
    ...(options.maxWaiting === undefined ? {} : { maxWaiting: options.maxWaiting }),
  });
  const push = async (message: InboundMessage) => {
    pushed.push(message);
    return 'accepted' as const;
  };
  /** Takes an event and waits for its push (handle resolves once it is journaled). */
  const take = async (event: unknown, by = push): Promise<void> => {
    await receiver.handle(event, by);
    await receiver.settled();
  };
  return { receiver, push, take, pushed, calls, tokens, saved, journal, abort };
}

const message = (fields: Record<string, unknown>) => ({ type: 'message', channel: 'C1', channel_type: 'channel', user: 'U0ALICE', text: 'hi', ts: '100.000001', ...fields });

describe('slack intake', () => {
  it('pushes the message and app_mention events of one mention once, with the sender\'s name', async () => {
    const { take, pushed, calls } = setup();
    await take(message({ text: '<@U0BOT> hi' }));
    await take({ type: 'app_mention', channel: 'C1', user: 'U0ALICE', text: '<@U0BOT> hi', ts: '100.000001' });
    await take(message({ text: '<@U0BOT> hi' })); // a redelivery
    assert.equal(pushed.length, 1);
    assert.deepEqual(pushed[0]!.sender, { id: 'U0ALICE', name: 'name-U0ALICE' });
    await take(message({ ts: '100.000002', text: 'again' }));
    assert.equal(calls.filter((c) => c.startsWith('users.info')).length, 1, 'names are cached');
  });

  it('ignores events that are not messages, and pushes nothing for bots', async () => {
    const { take, pushed } = setup();
    await take({ type: 'reaction_added', user: 'U0ALICE' });
    await take(message({ bot_id: 'B9', user: 'U9' }));
    await take(undefined);
    assert.equal(pushed.length, 0);
  });

  it('a thread the bot posted in (seen by its own echo) addresses the messages in it', async () => {
    const { take, pushed, calls } = setup();
    await take(message({ user: 'U0BOT', bot_id: 'B0BOT', ts: '100.000005', thread_ts: '100.000001' }));
    await take(message({ ts: '100.000006', thread_ts: '100.000001', text: 'follow-up' }));
    assert.equal(pushed[0]!.addressed, true);
    assert.equal(pushed[0]!.thread, '100.000001');
    assert.deepEqual(calls.filter((c) => c.startsWith('conversations')), [], 'no lookup needed');
  });

  it('asks Slack once whether the bot is in a thread it has not seen since start', async () => {
    const { take, pushed, calls, tokens } = setup({ replies: [{ user: 'U0ALICE' }, { user: 'U0BOT', bot_id: 'B0BOT' }] });
    await take(message({ ts: '100.000006', thread_ts: '100.000001', text: 'one' }));
    await take(message({ ts: '100.000007', thread_ts: '100.000001', text: 'two' }));
    assert.deepEqual(pushed.map((m) => m.addressed), [true, true]);
    assert.deepEqual(calls.filter((c) => c.startsWith('conversations')), ['conversations.replies C1 100.000001']);
    assert.ok(tokens.length > 0 && tokens.every((t) => t === 'xoxb-secret'), 'every Web API call carries the bot token (app.client has none)');
    const other = setup({ replies: [{ user: 'U0ALICE' }] });
    await other.take(message({ ts: '100.000006', thread_ts: '100.000001', text: 'one' }));
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
    await Promise.all(taken);
    assert.equal(refused, 9980);
    assert.equal(pushed.length, 0, 'journaled (acknowledged), not pushed yet');
    release();
    await receiver.settled();
    assert.deepEqual([pushed.length, receiver.waiting], [20, 0]);
    // Room again: a redelivery is taken.
    await receiver.handle(message({ channel: 'C1', ts: '100.999999', text: 'again' }), slowPush);
    await receiver.settled();
    assert.equal(pushed.length, 21);
  });

  it('a refused push is tried again: the event was journaled (and may be acknowledged) before any push', async () => {
    const { receiver, pushed, journal } = setup();
    let refusals = 2;
    const push = async (m: InboundMessage) => {
      if (refusals-- > 0) throw new Error('the store is failing');
      pushed.push(m);
      return 'accepted' as const;
    };
    await receiver.handle(message({}), push);
    assert.deepEqual((await journal.list('')).map((e) => e.key), ['received/C1:100.000001'], 'journaled when handle resolved');
    await receiver.handle(message({}), push); // a redelivery meanwhile: already taken
    await receiver.settled();
    assert.deepEqual(pushed.map((m) => m.id), ['C1:100.000001']);
    assert.deepEqual(await journal.list(''), [], 'dropped from the journal once pushed');
  });

  it('rejects (no ack: Slack delivers it again) only when the journal cannot be written', async () => {
    const state = testChannelState();
    let broken = true;
    const journal: ChannelState = { ...state, put: async (key, value) => (broken ? Promise.reject(new Error('disk I/O error')) : state.put(key, value)) };
    const { receiver, push, pushed } = setup({ journal });
    await assert.rejects(receiver.handle(message({}), push), /disk I\/O error/);
    broken = false;
    await receiver.handle(message({}), push);
    await receiver.settled();
    assert.equal(pushed.length, 1);
  });

  it('what a listen journaled and did not push, the next one pushes (a restart before the enrichment)', async () => {
    const first = setup();
    first.abort.abort(); // the listen ends before the push could be tried
    await first.receiver.handle(message({ text: 'said before the stop' }), first.push);
    await first.receiver.settled();
    assert.equal(first.pushed.length, 0);
    const second = setup({ journal: first.journal });
    assert.equal(await second.receiver.replay(second.push), 1);
    await second.receiver.settled();
    assert.deepEqual(second.pushed.map((m) => [m.id, m.text, m.sender.name]), [['C1:100.000001', 'said before the stop', 'name-U0ALICE']]);
    assert.deepEqual(await first.journal.list(''), []);
  });

  it('a thread lookup that fails is tried again, not taken for "the bot is not in it"', async () => {
    const inThread = setup({ replies: [{ user: 'U0BOT', bot_id: 'B0BOT' }], repliesFail: 1 });
    await inThread.take(message({ ts: '100.000006', thread_ts: '100.000001', text: 'follow-up' }));
    assert.equal(inThread.pushed[0]!.addressed, true, 'the second lookup found the bot');
    assert.equal(inThread.calls.filter((c) => c.startsWith('conversations')).length, 2);
    const notIn = setup({ replies: [{ user: 'U0ALICE' }], repliesFail: 1 });
    await notIn.take(message({ ts: '100.000006', thread_ts: '100.000001', text: 'chatter' }));
    assert.equal(notIn.pushed[0]!.addressed, false, 'Slack said no, on the second try');
  });

  it('a thread lookup that keeps failing counts as addressed (never silently chatter), and the next message asks again', async () => {
    const { take, pushed, calls } = setup({ replies: [{ user: 'U0ALICE' }], repliesFail: 3 });
    await take(message({ ts: '100.000006', thread_ts: '100.000001', text: 'follow-up' }));
    assert.equal(pushed[0]!.addressed, true);
    assert.equal(pushed[0]!.thread, '100.000001');
    await take(message({ ts: '100.000007', thread_ts: '100.000001', text: 'next' }));
    assert.equal(pushed[1]!.addressed, false, 'asked again, and Slack answered');
    assert.equal(calls.filter((c) => c.startsWith('conversations')).length, 4);
    const rateLimited = setup({ replies: [{ user: 'U0BOT' }], repliesFail: 1, repliesError: Object.assign(new Error('rate limited'), { code: 'slack_webapi_rate_limited_error', retryAfter: 0 }) });
    await rateLimited.take(message({ ts: '100.000006', thread_ts: '100.000001', text: 'follow-up' }));
    assert.equal(rateLimited.pushed[0]!.addressed, true);
  });

  it('completes a Slack Connect file stub (file_access: check_file_info) with files.info', async () => {
    const server = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('connect'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const { take, pushed, calls } = setup({ files: { F1: { id: 'F1', name: 'shared.txt', mimetype: 'text/plain', size: 7, mode: 'hosted', url_private_download: `${base}/f` } } });
      const stub = (id: string) => ({ id, mode: 'file_access', file_access: 'check_file_info', created: 0, timestamp: 0, user: '' });
      await take(message({ channel: 'D1', channel_type: 'im', subtype: 'file_share', text: '', files: [stub('F1'), stub('F404')] }));
      assert.deepEqual(calls.filter((c) => c.startsWith('files.info')), ['files.info F1', 'files.info F404']);
      assert.equal(pushed[0]!.attachments![0]!.name, 'shared.txt');
      assert.equal(pushed[0]!.attachments![0]!.path, 'inbox/connect');
      assert.match(pushed[0]!.attachments![1]!.note!, /Slack Connect file/);
    } finally {
      server.closeAllConnections();
      server.close();
    }
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
      // handle resolves once journaled; the pushes follow, in the chat's order
      const withFile = receiver.handle(
        message({ channel: 'D1', channel_type: 'im', subtype: 'file_share', text: '', files: [{ id: 'F1', name: 'a.txt', mimetype: 'text/plain', size: 5, url_private_download: `${base}/f` }, { id: 'F2', name: 'b.txt', url_private_download: 'https://evil.example/f' }] }),
        push,
      );
      const after = receiver.handle(message({ channel: 'D1', channel_type: 'im', ts: '100.000009', text: 'after the file' }), push);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(pushed.length, 0, 'the later message waits for the file');
      release();
      await Promise.all([withFile, after]);
      await receiver.settled();
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
