import assert from 'node:assert/strict';
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { oggOpusVoice, startFakeWhisper, type FakeWhisper } from '../../test/fixtures/fake-whisper.ts';
import { testLogger } from '../../test/support/log.ts';
import { createTranscriber, sniffAudio, uploadExtension, type TranscriberOptions } from './transcribe.ts';

describe('transcription client', () => {
  let workspace: string;
  let whisper: FakeWhisper;
  let waits: number[];

  before(async () => {
    workspace = await realpath(await mkdtemp(join(tmpdir(), 'sb-voice-')));
    await mkdir(join(workspace, 'inbox'));
    whisper = await startFakeWhisper({ apiKey: 'sk-whisper' });
  });
  after(async () => {
    await whisper.close();
    await rm(workspace, { recursive: true, force: true });
  });
  beforeEach(() => {
    whisper.requests.length = 0;
    whisper.refused.length = 0;
    whisper.script = [];
    whisper.fallback = () => ({ text: 'hello from the fake whisper' });
    waits = [];
  });

  const client = (extra: Partial<TranscriberOptions> = {}) =>
    createTranscriber({
      baseUrl: whisper.baseUrl,
      model: 'whisper-1',
      apiKey: 'sk-whisper',
      timeoutMs: 5000,
      workspace,
      log: testLogger(),
      sleep: async (ms) => void waits.push(ms),
      random: () => 0.5,
      ...extra,
    });

  async function save(name: string, bytes: Uint8Array): Promise<string> {
    await writeFile(join(workspace, 'inbox', name), bytes);
    return `inbox/${name}`;
  }

  it("sends a Telegram voice note (.oga) as .ogg with model, language and response_format json, and returns the text", async () => {
    const voice = oggOpusVoice();
    const path = await save('voice.oga', voice);
    whisper.script = [{ text: '  What is the weather tomorrow?\n' }];
    const result = await client({ language: 'en' }).transcribe(path, AbortSignal.timeout(5000));
    assert.deepEqual(result, { ok: true, text: 'What is the weather tomorrow?' });
    assert.equal(whisper.requests.length, 1);
    const [request] = whisper.requests;
    assert.equal(request!.fileName, 'audio.ogg');
    assert.equal(request!.fileType, 'audio/ogg');
    assert.equal(request!.model, 'whisper-1');
    assert.equal(request!.language, 'en');
    assert.equal(request!.responseFormat, 'json');
    assert.equal(request!.authorization, 'Bearer sk-whisper');
    assert.deepEqual(request!.bytes, voice);
  });

  it('names each format as the endpoint takes it: WhatsApp .opus, MP3, M4A, WAV by their bytes; a known name without known bytes by its name', async () => {
    const mp3 = Buffer.concat([Buffer.from('ID3'), Buffer.alloc(61, 1)]);
    const m4a = Buffer.concat([Buffer.from([0, 0, 0, 0x20]), Buffer.from('ftypM4A '), Buffer.alloc(52)]);
    const wav = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVE'), Buffer.alloc(52)]);
    assert.equal(sniffAudio(oggOpusVoice()), 'ogg');
    assert.equal(uploadExtension('PTT-20260101-WA0001.opus', oggOpusVoice()), 'ogg');
    assert.equal(uploadExtension('memo.bin', mp3), 'mp3');
    assert.equal(uploadExtension('Recording.m4a', m4a), 'm4a');
    assert.equal(uploadExtension('x.wav', wav), 'wav');
    assert.equal(uploadExtension('unknown.aac', Buffer.alloc(16)), 'm4a');
    assert.equal(uploadExtension('song.xyz', Buffer.alloc(16)), undefined);
    const transcriber = client();
    for (const [name, bytes, sent] of [['PTT-WA0001.opus', oggOpusVoice(), 'audio.ogg'], ['memo.mp3', mp3, 'audio.mp3'], ['Recording.m4a', m4a, 'audio.m4a']] as const) {
      const result = await transcriber.transcribe(await save(name, bytes), AbortSignal.timeout(5000));
      assert.equal(result.ok, true, JSON.stringify(result));
      assert.equal(whisper.requests.at(-1)!.fileName, sent);
    }
    assert.deepEqual(whisper.refused, []);
  });

  it('the fake is as strict as OpenAI: an .oga name is refused with 400 Invalid file format', async () => {
    const form = new FormData();
    form.append('file', new File([oggOpusVoice()], 'voice.oga', { type: 'audio/ogg' }));
    form.append('model', 'whisper-1');
    const response = await fetch(`${whisper.baseUrl}/audio/transcriptions`, { method: 'POST', headers: { authorization: 'Bearer sk-whisper' }, body: form });
    assert.equal(response.status, 400);
    assert.match(((await response.json()) as { error: { message: string } }).error.message, /Invalid file format/);
  });

  it('refuses a file that is no audio format the endpoint takes, without a request', async () => {
    const result = await client().transcribe(await save('notes.txt', Buffer.from('just some text, not audio')), AbortSignal.timeout(5000));
    assert.equal(result.ok, false);
    assert.match((result as { reason: string }).reason, /not in an audio format the transcription endpoint takes \(flac, mp3/);
    assert.equal(whisper.requests.length, 0);
  });

  it('refuses audio over max_audio_mb with a line naming the size and the key, without a request', async () => {
    const path = await save('long.ogg', Buffer.concat([oggOpusVoice(), Buffer.alloc(3 * 1024 * 1024)]));
    const result = await client({ maxBytes: 2 * 1024 * 1024 }).transcribe(path, AbortSignal.timeout(5000));
    assert.equal(result.ok, false);
    assert.match((result as { reason: string }).reason, /the file is 3\.0 MB, over the 2\.0 MB the transcription endpoint takes \(\[transcription\] max_audio_mb\)/);
    assert.equal(whisper.requests.length, 0);
  });

  it("an endpoint's own size limit (413) is reported, not retried", async () => {
    const small = await startFakeWhisper({ maxBytes: 1024 });
    try {
      const path = await save('big.ogg', Buffer.concat([oggOpusVoice(), Buffer.alloc(4096)]));
      const result = await client({ baseUrl: small.baseUrl }).transcribe(path, AbortSignal.timeout(5000));
      assert.equal(result.ok, false);
      assert.match((result as { reason: string }).reason, /^the transcription endpoint answered HTTP 413: Maximum content size limit/);
      assert.equal(small.refused.length, 1);
      assert.deepEqual(waits, []);
    } finally {
      await small.close();
    }
  });

  it('retries a 429 after its Retry-After, and 5xx with backoff, then succeeds', async () => {
    whisper.script = [{ status: 429, message: 'Rate limit reached for whisper-1', headers: { 'retry-after': '3' } }, { status: 503, message: 'overloaded' }, { text: 'third time lucky' }];
    const result = await client().transcribe(await save('v1.ogg', oggOpusVoice()), AbortSignal.timeout(5000));
    assert.deepEqual(result, { ok: true, text: 'third time lucky' });
    assert.equal(whisper.requests.length, 3);
    assert.equal(waits[0], 3000, 'waited the Retry-After (longer than the backoff)');
    assert.equal(waits[1], 1000, 'then the doubled backoff');
  });

  it('gives up after max_retries with the last error, and does not retry a 4xx', async () => {
    whisper.fallback = () => ({ status: 500, message: 'internal error' });
    const failed = await client({ maxRetries: 1 }).transcribe(await save('v2.ogg', oggOpusVoice()), AbortSignal.timeout(5000));
    assert.deepEqual(failed, { ok: false, reason: 'the transcription endpoint answered HTTP 500: internal error' });
    assert.equal(whisper.requests.length, 2);
    whisper.requests.length = 0;
    whisper.fallback = () => ({ status: 400, message: 'Audio file might be corrupted or unsupported' });
    const refused = await client().transcribe(await save('v3.ogg', oggOpusVoice()), AbortSignal.timeout(5000));
    assert.deepEqual(refused, { ok: false, reason: 'the transcription endpoint answered HTTP 400: Audio file might be corrupted or unsupported' });
    assert.equal(whisper.requests.length, 1);
  });

  it('does not wait for a Retry-After longer than retry_max_wait_seconds', async () => {
    whisper.script = [{ status: 429, message: 'Rate limit reached', headers: { 'retry-after': '120' } }];
    const result = await client({ maxRetryAfterMs: 30_000 }).transcribe(await save('v4.ogg', oggOpusVoice()), AbortSignal.timeout(5000));
    assert.equal(result.ok, false);
    assert.match((result as { reason: string }).reason, /HTTP 429: Rate limit reached \(asked to wait 120 s\)/);
    assert.deepEqual(waits, []);
  });

  it('a hung endpoint times out, is retried once, and is reported with the key to change', async () => {
    whisper.fallback = () => ({ hang: true });
    const result = await client({ timeoutMs: 200, maxRetries: 5 }).transcribe(await save('v5.ogg', oggOpusVoice()), AbortSignal.timeout(5000));
    assert.deepEqual(result, { ok: false, reason: 'no answer within 200 ms ([transcription] timeout_seconds)' });
    assert.equal(whisper.requests.length, 2);
  });

  it('an endpoint that is down, an empty transcript and the wrong key are failures with a reason', async () => {
    const down = await startFakeWhisper();
    const downUrl = down.baseUrl;
    await down.close();
    const unreachable = await client({ baseUrl: downUrl, maxRetries: 0 }).transcribe(await save('v6.ogg', oggOpusVoice()), AbortSignal.timeout(5000));
    assert.equal(unreachable.ok, false);
    assert.match((unreachable as { reason: string }).reason, /audio\/transcriptions unreachable: fetch failed: .*ECONNREFUSED/);
    whisper.script = [{ text: '   ' }];
    assert.deepEqual(await client().transcribe('inbox/v6.ogg', AbortSignal.timeout(5000)), { ok: false, reason: 'the transcription came back empty (silence, or speech too unclear)' });
    const wrongKey = await client({ apiKey: 'sk-wrong' }).transcribe('inbox/v6.ogg', AbortSignal.timeout(5000));
    assert.deepEqual(wrongKey, { ok: false, reason: 'the transcription endpoint answered HTTP 401: Incorrect API key provided' });
  });

  it('refuses a path outside the workspace', async () => {
    const result = await client().transcribe('../../etc/passwd', AbortSignal.timeout(5000));
    assert.equal(result.ok, false);
    assert.equal(whisper.requests.length, 0);
  });
});
