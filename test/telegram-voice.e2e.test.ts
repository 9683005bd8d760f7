/**
 * A Telegram voice note end to end: the real daemon with `[transcription]`, the Telegram Bot API
 * peer (test/peers/telegram.ts `postVoice`: OGG/Opus stored as `voice/file_N.oga`), the scripted
 * transcription server (test/fixtures/fake-whisper.ts, strict about the file extension) and the
 * scripted model. The note is downloaded, transcribed, and answered from its transcript, with
 * the transcript echoed first; the API key never reaches the log.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { oggOpusVoice, startFakeWhisper, type FakeWhisper } from './fixtures/fake-whisper.ts';
import { startTelegramPeer, type TelegramPeer } from './peers/telegram.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { until } from './support/wait.ts';

describe('telegram voice notes', () => {
  let model: FakeOpenAI;
  let whisper: FakeWhisper;
  let peer: TelegramPeer;
  let daemon: Daemon | undefined;
  let config: ReturnType<typeof tempConfig> | undefined;

  before(async () => {
    model = await startFakeOpenAI();
    whisper = await startFakeWhisper({ apiKey: 'sk-whisper-secret' });
    peer = await startTelegramPeer();
  });
  after(async () => {
    if (daemon && daemon.child.exitCode === null && daemon.child.signalCode === null) {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
    config?.cleanup();
    await peer.close();
    await whisper.close();
    await model.close();
  });

  it('a voice note is transcribed and answered, the transcript echoed first', async () => {
    config = tempConfig(
      model.baseUrl,
      `[log]\nformat = "json"\n[transcription]\nkind = "openai"\nbase_url = "${whisper.baseUrl}"\nmodel = "whisper-1"\napi_key = "\${WHISPER_KEY}"\nlanguage = "en"\necho_transcript = true\n` +
        `${peer.configSection()}poll_timeout_seconds = 1\nallow = ["${peer.users.alice}"]\n`,
    );
    whisper.script = [{ text: 'What time is sunset today?' }];
    model.fallback = (request) => {
      const user = request.body.messages.filter((message) => message.role === 'user').at(-1)!.content;
      return { text: /transcribed — the person's words\] What time is sunset today\?/.test(String(user)) ? 'Around 18:40.' : `not heard: ${String(user)}` };
    };
    daemon = startDaemon(['start', '--config', config.file], { env: { TEST_MODEL_KEY: 'sk-model', WHISPER_KEY: 'sk-whisper-secret' } });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
    const log = (): string => `\nbot: ${JSON.stringify(peer.botMessages({ kind: 'dm', user: 'alice' }))}\n${daemon?.stdout().slice(-3000)}\n${daemon?.stderr().slice(-1000)}`;

    const voice = oggOpusVoice(2048);
    await peer.postVoice('alice', { kind: 'dm', user: 'alice' }, voice, { duration: 3 });
    await until(() => peer.botMessages({ kind: 'dm', user: 'alice' }).length >= 1, 'the answer to the voice note', 15_000, log);

    assert.equal(whisper.requests.length, 1, log());
    const [request] = whisper.requests;
    assert.equal(request!.fileName, 'audio.ogg', 'the .oga voice note goes under a name the endpoint takes');
    assert.deepEqual(request!.bytes, voice, 'the bytes Telegram served');
    assert.equal(request!.model, 'whisper-1');
    assert.equal(request!.language, 'en');
    assert.deepEqual(whisper.refused, []);
    assert.deepEqual(
      peer.botMessages({ kind: 'dm', user: 'alice' }).map((m) => m.text),
      ['🎤 “What time is sunset today?”\n\nAround 18:40.'],
    );
    assert.match(daemon.stdout(), /"msg":"transcription"/);
    assert.doesNotMatch(daemon.stdout() + daemon.stderr(), /sk-whisper-secret/);

    daemon.child.kill('SIGTERM');
    assert.equal((await daemon.exited).code, 0);
    daemon = undefined;
  });
});
