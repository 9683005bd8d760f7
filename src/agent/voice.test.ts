/**
 * A voice note through the whole turn path: a channel pushes a message with a saved OGG/Opus
 * voice note, the runtime builds the turn, the agent has it transcribed by the scripted
 * transcription server, and the scripted model gets the transcript as the person's words.
 * History keeps the transcript (a later turn reads it; nothing is transcribed twice); a failed
 * transcription still ends in a reply; `echo` sends the transcript before the answer.
 */
import assert from 'node:assert/strict';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { Attachment } from '../channel.ts';
import { createTranscriber } from '../media/transcribe.ts';
import { createOpenAIProvider } from '../providers/openai.ts';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from '../../test/fixtures/fake-openai.ts';
import { oggOpusVoice, startFakeWhisper, type FakeWhisper } from '../../test/fixtures/fake-whisper.ts';
import { testLogger } from '../../test/support/log.ts';
import { saveAttachment, startTurnPath } from '../../test/support/turn-path.ts';

const lastUser = (request: RecordedRequest): string => {
  const content = request.body.messages.filter((message) => message.role === 'user').at(-1)!.content;
  return typeof content === 'string' ? content : JSON.stringify(content);
};

describe('voice notes through the turn path', () => {
  let workspace: string;
  let model: FakeOpenAI;
  let whisper: FakeWhisper;
  const dirs: string[] = [];

  before(async () => {
    workspace = await realpath(await mkdtemp(join(tmpdir(), 'sb-voice-ws-')));
    model = await startFakeOpenAI();
    whisper = await startFakeWhisper();
  });
  after(async () => {
    await model.close();
    await whisper.close();
    for (const dir of [workspace, ...dirs]) await rm(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    whisper.requests.length = 0;
    whisper.script = [];
    model.fallback = (request) => ({ text: `heard: ${lastUser(request)}` });
  });

  const save = (id: string, name: string, bytes: Uint8Array, kind: Attachment['kind'] = 'voice', mime = 'audio/ogg'): Promise<Attachment> => saveAttachment(workspace, id, name, bytes, kind, mime);

  async function start(options: { echo?: boolean; transcription?: boolean } = {}) {
    let made = 0;
    const provider = createOpenAIProvider({ baseUrl: model.baseUrl, model: 'm', timeoutMs: 5000 });
    const started = await startTurnPath({
      workspace,
      dirs,
      provider,
      agent:
        options.transcription === false
          ? {}
          : {
              transcription: {
                echo: options.echo ?? false,
                transcriber: async () => {
                  made++;
                  return createTranscriber({ baseUrl: whisper.baseUrl, model: 'whisper-1', timeoutMs: 2000, maxRetries: 1, initialBackoffMs: 5, maxBytes: 64 * 1024, workspace, log: testLogger() });
                },
              },
            },
    });
    return { ...started, made: () => made };
  }

  it("a Telegram voice note reaches the transcription server, and its transcript reaches the model as the person's words; later turns read it from history", async () => {
    const voice = oggOpusVoice();
    const note = await save('v1', 'voice.oga', voice);
    whisper.script = [{ text: 'Remind me to water the plants at six.' }];
    const { channel, runtime, database, made } = await start();
    try {
      const before = model.requests.length;
      await channel.inject({ id: 'v1', text: '', attachments: [note] });
      await channel.waitForSent(1);
      assert.equal(whisper.requests.length, 1);
      assert.equal(whisper.requests[0]!.fileName, 'audio.ogg');
      assert.deepEqual(whisper.requests[0]!.bytes, voice);
      const asked = lastUser(model.requests[before]!);
      assert.match(asked, /\[voice note voice\.oga, transcribed — the person's words\] Remind me to water the plants at six\.$/);
      assert.match(asked, /^\[The person attached a file/, 'the file is still described (its path stays usable by the tools)');
      assert.match(channel.sent[0]!.text, /^heard: .*water the plants at six\.$/s);

      // A later turn: the transcript is in the history the model sees; no second transcription.
      await channel.inject({ id: 't2', text: 'what did I just ask?' });
      await channel.waitForSent(2);
      assert.equal(whisper.requests.length, 1);
      assert.match(JSON.stringify(model.requests.at(-1)!.body.messages), /Remind me to water the plants at six\./);
      const rows = await database.all<{ message: string }>('SELECT message FROM history ORDER BY id');
      assert.match(rows[0]!.message, /transcribed — the person's words\] Remind me to water the plants at six\./);
      assert.equal(made(), 1, 'the client is made once');
    } finally {
      await runtime.stop();
    }
  });

  it('a failed transcription (endpoint error, oversized, empty) ends in a reply, and the model is told why', async () => {
    const note = await save('f1', 'voice.oga', oggOpusVoice());
    whisper.fallback = () => ({ status: 503, message: 'The server is overloaded' });
    const { channel, runtime } = await start();
    try {
      await channel.inject({ id: 'f1', text: 'listen to this', attachments: [note] });
      await channel.waitForSent(1);
      assert.equal(whisper.requests.length, 2, 'retried once (max_retries = 1)');
      const asked = lastUser(model.requests.at(-1)!);
      assert.match(asked, /^listen to this\n\n/);
      assert.match(asked, /\[voice note voice\.oga could not be transcribed: the transcription endpoint answered HTTP 503: The server is overloaded\. Tell the person/);
      assert.match(channel.sent[0]!.text, /could not be transcribed/);

      whisper.fallback = () => ({ text: '' });
      await channel.inject({ id: 'f2', text: '', attachments: [await save('f2', 'memo.m4a', Buffer.concat([Buffer.from([0, 0, 0, 0x20]), Buffer.from('ftypM4A '), Buffer.alloc(40)]), 'audio', 'audio/mp4')] });
      await channel.waitForSent(2);
      assert.match(lastUser(model.requests.at(-1)!), /\[audio memo\.m4a could not be transcribed: the transcription came back empty/);
      assert.ok(channel.sent[1]!.text.length > 0);

      const requests = whisper.requests.length;
      await channel.inject({ id: 'f3', text: '', attachments: [await save('f3', 'long.oga', oggOpusVoice(100 * 1024))] });
      await channel.waitForSent(3);
      assert.equal(whisper.requests.length, requests, 'an oversized file is not sent');
      assert.match(lastUser(model.requests.at(-1)!), /\[voice note long\.oga could not be transcribed: the file is 101 KB, over the 64 KB the transcription endpoint takes \(\[transcription\] max_audio_mb\); ask for a shorter recording/);
    } finally {
      await runtime.stop();
    }
  });

  it('echo_transcript: the person gets the transcript before the answer', async () => {
    const note = await save('e1', 'voice.oga', oggOpusVoice());
    whisper.script = [{ text: 'Is it going to rain?' }];
    model.fallback = () => ({ text: 'Probably not.' });
    const { channel, runtime } = await start({ echo: true });
    try {
      await channel.inject({ id: 'e1', text: '', attachments: [note] });
      await channel.waitForSent(1);
      assert.equal(channel.sent[0]!.text, '🎤 “Is it going to rain?”\n\nProbably not.');
    } finally {
      await runtime.stop();
    }
  });

  it('without [transcription] a voice note is described as before, and nothing is sent to a transcription server', async () => {
    const note = await save('n1', 'voice.oga', oggOpusVoice());
    const { channel, runtime } = await start({ transcription: false });
    try {
      await channel.inject({ id: 'n1', text: '', attachments: [note] });
      await channel.waitForSent(1);
      assert.equal(whisper.requests.length, 0);
      const asked = lastUser(model.requests.at(-1)!);
      assert.match(asked, /voice\.oga \(voice, audio\/ogg/);
      assert.doesNotMatch(asked, /transcribed/);
    } finally {
      await runtime.stop();
    }
  });
});
