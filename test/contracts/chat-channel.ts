/**
 * The chat-channel contract: the real daemon (`switchboard start`), a scripted model on
 * 127.0.0.1 and a local peer playing the platform. Every chat adapter (Telegram, Discord,
 * Slack, …) runs it through its own {@link ChatPeer}: DM round trip, mention gating in groups,
 * threads / topics as their own conversations, long replies split in order, streaming edits,
 * the pairing flow, denied senders, chat commands and attachments — photos among them: a photo
 * reaches the model as an image part (the prepared bytes of what was sent), with or without a
 * caption; a damaged image and a file over the size limit are answered, not dropped.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createHash } from 'node:crypto';
import { createImagePreparer, IMAGE_LIMITS } from '../../src/media/image.ts';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from '../fixtures/fake-openai.ts';
import { oggOpusVoice, startFakeWhisper, type FakeWhisper } from '../fixtures/fake-whisper.ts';
import { runCli, startDaemon, tempConfig, type Daemon } from '../support/cli.ts';
import { cameraJpeg } from '../support/photos.ts';

export type PeerUser = 'alice' | 'bob' | 'mallory';

/** Where a person posts: a DM with the bot, the group (room / channel), or a thread / topic in it. */
export type Place = { readonly kind: 'dm'; readonly user: PeerUser } | { readonly kind: 'group' } | { readonly kind: 'thread' };

export interface BotMessage {
  /** Final visible text (after edits; markup rendered the way the platform shows it). */
  readonly text: string;
  /** How many times the bot edited it. */
  readonly edits: number;
}

/** A local peer playing one platform, as the contract suite drives it. */
export interface ChatPeer {
  /** Channel name in the config (`[channels.<name>]`). */
  readonly channel: string;
  /** The platform's message-length limit (as the platform counts it). */
  readonly limit: number;
  /** Platform sender ids of the test people (what `allow` lists). */
  readonly users: Readonly<Record<PeerUser, string>>;
  /** The `[channels.<name>]` section pointing at this peer; the suite appends the policy keys. */
  configSection(): string;
  /**
   * A person posts `text`. In the group or a thread, `mention` addresses the bot the platform's
   * way (an @mention). A thread post starts or continues the one test thread / topic.
   */
  post(user: PeerUser, place: Place, text: string, options?: { mention?: boolean }): Promise<void>;
  /** A person posts a file (with an optional caption). */
  postFile(user: PeerUser, place: Place, file: { name: string; mime: string; data: Uint8Array }, caption?: string): Promise<void>;
  /** Messages the bot has posted in a place, in order. */
  botMessages(place: Place): readonly BotMessage[];
  /** Names of files the bot has posted in a place. */
  botFiles(place: Place): readonly string[];
  /** Typing indications the bot has sent to a place (platforms without one: always 0). */
  typing(place: Place): number;
  /** Whether the platform has a typing indicator (and the peer counts it). */
  readonly hasTyping: boolean;
  /**
   * The platform's flood control, as the flood test drives it: the next call addressed to
   * `place` (a send, an edit, typing…) is answered the platform's way with "wait `ms`"
   * (Telegram 429 `retry_after`, Discord 429 `retry_after`, Slack 429 `Retry-After`, Matrix
   * `M_LIMIT_EXCEEDED`), and `callsInsideWait` counts the calls that reached the place while
   * inside a wait the peer announced — what the platform punishes.
   */
  readonly flood?: { waitNext(place: Place, ms: number): void; callsInsideWait(place: Place): number };
  /** Forgets everything recorded so far (between tests). */
  reset(): void;
  close(): Promise<void>;
}

const env = { TEST_MODEL_KEY: 'sk-contract' };

/** What a platform does not have at all; the tests that need it are skipped with that reason. */
export interface PlatformLacks {
  /** No group chats (email: every thread is between one person and the bot). */
  readonly groups?: string;
  /** No threads / topics inside a group (IRC). */
  readonly threads?: string;
  /** Messages cannot be edited, so nothing streams (IRC, email). */
  readonly edits?: string;
  /** No files (IRC). */
  readonly files?: string;
  /** Strangers are never answered, not even with a pairing code (email: no backscatter). */
  readonly pairing?: string;
}

export function runChatChannelContract(name: string, makePeer: () => Promise<ChatPeer>, lacks: PlatformLacks = {}): void {
  describe(`chat channel contract: ${name}`, () => {
    let peer: ChatPeer;
    let model: FakeOpenAI;
    /** A transcription endpoint, started by the voice test only. */
    let whisper: FakeWhisper | undefined;
    let daemon: Daemon | undefined;
    let config: ReturnType<typeof tempConfig> | undefined;
    const dmAlice: Place = { kind: 'dm', user: 'alice' };
    const dmMallory: Place = { kind: 'dm', user: 'mallory' };
    const group: Place = { kind: 'group' };
    const thread: Place = { kind: 'thread' };

    before(async () => {
      model = await startFakeOpenAI();
      peer = await makePeer();
    });
    after(async () => {
      // Undo whatever part of before() ran: a peer that failed to start must not leave the
      // fake model (and so the test file) running.
      try {
        await stop();
        await peer?.close();
      } finally {
        await whisper?.close();
        await model?.close();
      }
    });

    async function start(policy: { allow?: readonly string[]; mentionOnly?: boolean; stream?: boolean; maxAttachmentMb?: number; transcription?: string } = {}): Promise<void> {
      await stop();
      peer.reset();
      model.requests.length = 0;
      const lines = [
        ...(policy.allow ? [`allow = ${JSON.stringify(policy.allow)}`] : []),
        ...(policy.mentionOnly === undefined ? [] : [`mention_only = ${policy.mentionOnly}`]),
        ...(policy.stream === undefined ? [] : [`stream = ${policy.stream}`]),
      ];
      const runtime = policy.maxAttachmentMb === undefined ? '' : `[runtime]\nmax_attachment_mb = ${policy.maxAttachmentMb}\n`;
      const transcription = policy.transcription === undefined ? '' : `[transcription]\nkind = "openai"\nbase_url = "${policy.transcription}"\nmodel = "whisper-1"\n`;
      config = tempConfig(model.baseUrl, `${runtime}${transcription}[log]\nformat = "json"\n${peer.configSection()}${lines.join('\n')}\n`);
      daemon = startDaemon(['start', '--config', config.file], { env });
      await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
    }

    async function stop(): Promise<void> {
      if (daemon) {
        daemon.child.kill('SIGTERM');
        const { code } = await daemon.exited;
        assert.equal(code, 0, `daemon exit code\n${daemon.stdout()}\n${daemon.stderr()}`);
        daemon = undefined;
      }
      config?.cleanup();
      config = undefined;
    }

    const texts = (place: Place): string[] => peer.botMessages(place).map((m) => m.text);
    const failure = (): string => `\nbot messages: ${JSON.stringify(['dm', 'group', 'thread'].map((k) => peer.botMessages(k === 'dm' ? dmAlice : ({ kind: k } as Place))))}\ndaemon log:\n${daemon?.stdout().slice(-4000)}\n${daemon?.stderr().slice(-2000)}`;

    async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!condition()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${failure()}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }

    /** Waits a little to be sure nothing more arrives. */
    const quiet = (ms = 600): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

    it('answers a direct message in the same DM', async () => {
      await start({ allow: [peer.users.alice] });
      await peer.post('alice', dmAlice, 'hello there');
      await until(() => texts(dmAlice).length === 1, 'the reply');
      assert.equal(texts(dmAlice)[0], 'echo: hello there');
      await peer.post('alice', dmAlice, 'and again');
      await until(() => texts(dmAlice).length === 2, 'the second reply');
      const last = model.requests.at(-1)!.body.messages.map((m) => m.content);
      assert.deepEqual(last.slice(1), ['hello there', 'echo: hello there', 'and again'], 'the first exchange is history');
      if (peer.hasTyping) assert.ok(peer.typing(dmAlice) >= 1, 'a typing indicator was shown');
    });

    it('in the group answers only when addressed, with what was said before as context', { skip: lacks.groups ?? false }, async () => {
      await start({ allow: ['*'] });
      await peer.post('bob', group, 'just chatting among ourselves');
      await quiet();
      assert.equal(model.requests.length, 0, 'an unaddressed message never reaches the model on its own');
      assert.deepEqual(texts(group), []);
      await peer.post('alice', group, 'what do you think?', { mention: true });
      await until(() => texts(group).length === 1, 'the reply to the mention');
      assert.match(texts(group)[0]!, /what do you think\?/);
      const prompt = JSON.stringify(model.requests.at(-1)!.body.messages);
      assert.match(prompt, /just chatting among ourselves/, 'the earlier group message is context for the addressed turn');
      assert.equal(model.requests.length, 1);
    });

    it('keeps a thread / topic as its own conversation and replies inside it', { skip: lacks.groups ?? lacks.threads ?? false }, async () => {
      await start({ allow: ['*'] });
      await peer.post('alice', group, 'group question', { mention: true });
      await until(() => texts(group).length === 1, 'the group reply');
      await peer.post('alice', thread, 'thread question', { mention: true });
      await until(() => texts(thread).length === 1, 'the thread reply');
      assert.match(texts(thread)[0]!, /thread question/);
      assert.equal(texts(group).length, 1, 'the thread reply did not land in the main group');
      const threadPrompt = JSON.stringify(model.requests.at(-1)!.body.messages);
      assert.doesNotMatch(threadPrompt, /group question/, 'the thread does not share the group history');
    });

    it('splits a reply longer than the limit into parts that arrive complete and in order', async () => {
      await start({ allow: [peer.users.alice] });
      const paragraphs = Array.from({ length: 12 }, (_, p) =>
        Array.from({ length: Math.ceil(peer.limit / 40) }, (_, w) => `p${p}w${w}`).join(' '),
      );
      const long = paragraphs.join('\n\n');
      model.script({ text: long });
      await peer.post('alice', dmAlice, 'tell me a lot');
      const words = long.split(/\s+/);
      await until(() => texts(dmAlice).join(' ').split(/\s+/).length >= words.length, 'every part', 20_000);
      await quiet();
      const parts = texts(dmAlice);
      assert.ok(parts.length > 1, 'more than one message');
      for (const part of parts) assert.ok(part.length <= peer.limit, `a part of ${part.length} characters is over the ${peer.limit} limit`);
      assert.deepEqual(parts.join(' ').split(/\s+/), words, 'every word, in order, once');
    });

    it('streams the reply into one message that ends as the full text', { skip: lacks.edits ?? false }, async () => {
      await start({ allow: [peer.users.alice], stream: true });
      const full = 'Streaming works: this sentence grows one piece at a time until it is complete.';
      model.script({ text: full, deltas: full.match(/.{1,8}/g)!, deltaDelayMs: 150 });
      await peer.post('alice', dmAlice, 'stream please');
      await until(() => texts(dmAlice)[0] === full, 'the finished streamed message', 15_000);
      await quiet();
      const messages = peer.botMessages(dmAlice);
      assert.equal(messages.length, 1, 'one message, edited, not several');
      assert.ok(messages[0]!.edits >= 1, 'the message was edited as the model streamed');
    });

    it("after the platform's \"wait\", no call reaches the chat until it has passed; the streamed reply still ends whole", { skip: lacks.edits ?? false }, async (t) => {
      if (!peer.flood) return t.skip('the peer has no flood control');
      await start({ allow: [peer.users.alice], stream: true });
      const full = 'Flood control: this reply streams on while the platform has asked the bot to wait, and it still ends whole, in one message.';
      model.script({ text: full, deltas: full.match(/.{1,5}/g)!, deltaDelayMs: 140 });
      await peer.post('alice', dmAlice, 'stream through a flood wait');
      await until(() => texts(dmAlice).length === 1, 'the streamed draft');
      // The next edit is answered "wait 3 s" (longer than discord.js waits out by itself); the model streams on for about 3 s.
      peer.flood.waitNext(dmAlice, 3000);
      await until(() => texts(dmAlice).at(-1) === full, 'the finished streamed message', 20_000);
      await quiet();
      assert.equal(peer.flood.callsInsideWait(dmAlice), 0, `calls reached the chat inside the wait${failure()}`);
      assert.deepEqual(texts(dmAlice), [full], 'one message, whole');
    });

    it('pairs an unknown sender: one code, nothing else until the operator approves', { skip: lacks.pairing ?? false }, async () => {
      await start();
      await peer.post('mallory', dmMallory, 'hi, who are you?');
      await until(() => texts(dmMallory).length === 1, 'the pairing code');
      const code = /pairing code is ([A-Z0-9]{6})/.exec(texts(dmMallory)[0]!)?.[1];
      assert.ok(code, texts(dmMallory)[0]);
      await peer.post('mallory', dmMallory, 'hello?');
      await quiet();
      assert.equal(texts(dmMallory).length, 1, 'the code is sent once');
      assert.equal(model.requests.length, 0, 'nothing reached the model');
      const approved = await runCli(['pairing', 'approve', peer.channel, code, '--config', config!.file], { env });
      assert.equal(approved.code, 0, approved.stderr);
      await peer.post('mallory', dmMallory, 'now?');
      await until(() => texts(dmMallory).length === 2, 'the answer after approval');
      assert.equal(texts(dmMallory)[1], 'echo: now?');
    });

    it('never lets a denied sender reach the model', async () => {
      await start({ allow: [peer.users.alice] });
      await peer.post('mallory', dmMallory, 'let me in');
      if (!lacks.groups) await peer.post('mallory', group, 'hey bot', { mention: true });
      await peer.post('alice', dmAlice, 'ping');
      await until(() => texts(dmAlice).length === 1, 'the allowed reply');
      await quiet();
      assert.deepEqual(texts(dmMallory), []);
      assert.deepEqual(texts(group), []);
      assert.equal(model.requests.length, 1);
      assert.doesNotMatch(JSON.stringify(model.requests), /let me in|hey bot/);
    });

    it('answers chat commands without the model: /help, /status, /model, /new', async () => {
      await start({ allow: [peer.users.alice] });
      await peer.post('alice', dmAlice, 'remember this line');
      await until(() => texts(dmAlice).length === 1, 'the first reply');
      await peer.post('alice', dmAlice, '/help');
      await until(() => texts(dmAlice).length === 2, '/help');
      assert.match(texts(dmAlice)[1]!, /\/new/);
      await peer.post('alice', dmAlice, '/status');
      await until(() => texts(dmAlice).length === 3, '/status');
      assert.match(texts(dmAlice)[2]!, /up|running/i);
      await peer.post('alice', dmAlice, '/model');
      await until(() => texts(dmAlice).length === 4, '/model');
      assert.match(texts(dmAlice)[3]!, /test-model/);
      await peer.post('alice', dmAlice, '/new');
      await until(() => texts(dmAlice).length === 5, '/new');
      assert.equal(model.requests.length, 1, 'commands never reach the model');
      await peer.post('alice', dmAlice, 'fresh start');
      await until(() => texts(dmAlice).length === 6, 'the reply after /new');
      const messages = model.requests.at(-1)!.body.messages.map((m) => m.content);
      assert.deepEqual(messages.slice(1), ['fresh start'], '/new started a fresh history');
    });

    it('saves a file a person sends in the workspace and sends one back', { skip: lacks.files ?? false }, async () => {
      await start({ allow: [peer.users.alice] });
      mkdirSync(join(config!.dir, 'data', 'workspace', 'out'), { recursive: true });
      writeFileSync(join(config!.dir, 'data', 'workspace', 'out', 'back.txt'), 'the answer is 42\n');
      model.script({ toolCalls: [{ name: 'send_file', arguments: { path: 'out/back.txt' } }] }, { text: 'sent it' });
      await peer.postFile('alice', dmAlice, { name: 'report.txt', mime: 'text/plain', data: new TextEncoder().encode('quarterly numbers\n') }, 'see attached');
      await until(() => texts(dmAlice).includes('sent it') && peer.botFiles(dmAlice).length === 1, 'the reply and the file');
      const first = JSON.stringify(model.requests[0]!.body.messages);
      assert.match(first, /see attached/);
      const path = /(inbox\/[^"\\ ]+report\.txt)/.exec(first)?.[1];
      assert.ok(path, `the model is told where the file is: ${first}`);
      assert.equal(readFileSync(join(config!.dir, 'data', 'workspace', path), 'utf8'), 'quarterly numbers\n', 'the file is in the workspace');
      assert.deepEqual(peer.botFiles(dmAlice), ['back.txt']);
    });

    /** The last user message of a request the model received: its text parts and its images (decoded from their data URLs). */
    function lastUser(request: RecordedRequest): { text: string; images: Array<{ mime: string; data: Buffer }> } {
      const message = [...request.body.messages].reverse().find((m) => m.role === 'user')!;
      const content: unknown = message.content;
      if (typeof content === 'string') return { text: content, images: [] };
      const parts = content as Array<{ type: string; text?: string; image_url?: { url: string } }>;
      return {
        text: parts.flatMap((part) => (part.type === 'text' ? [part.text ?? ''] : [])).join(''),
        images: parts.flatMap((part) => {
          const match = part.type === 'image_url' ? /^data:([^;]+);base64,(.*)$/s.exec(part.image_url?.url ?? '') : null;
          return match ? [{ mime: match[1]!, data: Buffer.from(match[2]!, 'base64') }] : [];
        }),
      };
    }
    const sha256 = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

    it('a photo reaches the model as an image part, with its caption; one without a caption is still a turn', { skip: lacks.files ?? false }, async () => {
      await start({ allow: [peer.users.alice] });
      const photo = await cameraJpeg(800, 600);
      const prepared = await createImagePreparer().prepare(photo, IMAGE_LIMITS.openai);
      assert.ok(prepared.ok, 'the test photo prepares');
      model.script({ text: 'a fern' }, { text: 'the same fern, again' });
      await peer.postFile('alice', dmAlice, { name: 'plant.jpg', mime: 'image/jpeg', data: photo }, 'what is this plant?');
      await until(() => texts(dmAlice).includes('a fern'), 'the answer to the photo', 20_000);
      const first = lastUser(model.requests[0]!);
      assert.match(first.text, /what is this plant\?/, 'the caption stays with the photo');
      assert.equal(first.images.length, 1, `one image part: ${first.text}`);
      assert.equal(first.images[0]!.mime, prepared.mime);
      assert.equal(sha256(first.images[0]!.data), sha256(prepared.data), 'the bytes are the prepared photo the person sent');

      await peer.postFile('alice', dmAlice, { name: 'again.jpg', mime: 'image/jpeg', data: photo });
      await until(() => texts(dmAlice).includes('the same fern, again'), 'the answer to the photo without a caption', 20_000);
      const second = lastUser(model.requests[1]!);
      assert.equal(second.images.length, 1, `the uncaptioned photo is a turn with its image: ${second.text}`);
      assert.equal(sha256(second.images[0]!.data), sha256(prepared.data));
      assert.doesNotMatch(second.text, /what is this plant/, "the first photo's caption is not the second's");
    });

    it('a voice note is transcribed and the model gets the words as the person\'s, marked; a failed transcription still ends in a reply', { skip: lacks.files ?? false }, async () => {
      whisper ??= await startFakeWhisper();
      whisper.requests.length = 0;
      whisper.script = [{ text: 'remind me to water the fern' }, { status: 503, message: 'overloaded' }, { status: 503, message: 'overloaded' }, { status: 503, message: 'overloaded' }];
      await start({ allow: [peer.users.alice], transcription: whisper.baseUrl });
      model.script({ text: 'I will.' }, { text: 'Sorry, say it again?' });
      const voice = oggOpusVoice(2048);
      await peer.postFile('alice', dmAlice, { name: 'note.ogg', mime: 'audio/ogg', data: voice });
      await until(() => texts(dmAlice).includes('I will.'), 'the answer to the voice note', 20_000);
      assert.equal(whisper.requests.length, 1, 'one transcription');
      assert.equal(sha256(whisper.requests[0]!.bytes), sha256(voice), 'the bytes the person sent reached the endpoint');
      assert.match(lastUser(model.requests[0]!).text, /transcribed[^\]]*\] remind me to water the fern/, 'the transcript, marked, is the person\'s words');

      await peer.postFile('alice', dmAlice, { name: 'again.ogg', mime: 'audio/ogg', data: voice });
      await until(() => texts(dmAlice).includes('Sorry, say it again?'), 'the answer when transcription fails', 30_000);
      assert.match(lastUser(model.requests[1]!).text, /could not be transcribed/, 'the model is told, and answers');
    });

    it('a damaged image and a file over the size limit each end in a reply, not silence', { skip: lacks.files ?? false }, async () => {
      await start({ allow: [peer.users.alice], maxAttachmentMb: 1 });
      model.script({ text: 'I see.' }, { text: 'Too big for me.' });
      const garbage = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 251));
      await peer.postFile('alice', dmAlice, { name: 'broken.jpg', mime: 'image/jpeg', data: garbage }, 'can you see this?');
      await until(() => texts(dmAlice).length === 1, 'the reply to the damaged image', 20_000);
      assert.match(texts(dmAlice)[0]!, /I could not look at broken\.jpg: its contents are not an image/, 'the person is told the image could not be read');
      assert.match(texts(dmAlice)[0]!, /I see\./, 'and still gets the answer');
      assert.equal(lastUser(model.requests[0]!).images.length, 0);
      assert.match(lastUser(model.requests[0]!).text, /broken\.jpg could not be shown to you/, 'the model is told too');

      await peer.postFile('alice', dmAlice, { name: 'scan.pdf', mime: 'application/pdf', data: Buffer.alloc(1536 * 1024, 0x25) }, 'and this one?');
      await until(() => texts(dmAlice).length === 2, 'the reply to the oversized file', 20_000);
      assert.equal(texts(dmAlice)[1], 'Too big for me.');
      assert.match(lastUser(model.requests[1]!).text, /scan\.pdf .*not downloaded: 1\.5 MB is over the 1\.0 MB limit/, 'the model is told the file was too big');
    });
  });
}
