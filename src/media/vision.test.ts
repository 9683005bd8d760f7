import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import sharp from 'sharp';
import { ProviderError, type ChatMessage, type ChatRequest, type Provider } from '../provider.ts';
import { createOpenAIProvider } from '../providers/openai.ts';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from '../../test/fixtures/fake-openai.ts';
import { cameraJpeg } from '../../test/support/photos.ts';
import { createImagePreparer, IMAGE_LIMITS, type ImageLimits } from './image.ts';
import { createVisionMemory, createVisionProvider, type VisionMode } from './vision.ts';
import { createWorkspaceImages } from './workspace-images.ts';

const signal = () => new AbortController().signal;
const limits: ImageLimits = { ...IMAGE_LIMITS.openai, longEdge: 512 };

/** What OpenAI answers a text-only model sent an image (quoted in vllm-project/vllm#11629). */
const OPENAI_REFUSAL = {
  status: 400,
  body: JSON.stringify({ error: { message: 'Invalid content type. image_url is only supported by certain models.', type: 'invalid_request_error', param: 'messages.[1].content.[0].type', code: null } }),
};
/** llama-server started without --mmproj (ggml-org/llama.cpp#13566). */
const LLAMA_CPP_REFUSAL = { status: 500, body: JSON.stringify({ error: { code: 500, message: 'image input is not supported by this server', type: 'server_error' } }) };

type Content = string | null | Array<{ type: string; text?: string; image_url?: { url: string } }>;
const contentOf = (request: RecordedRequest, index: number): Content => request.body.messages[index]!.content as Content;
const imageUrls = (request: RecordedRequest): string[] =>
  request.body.messages.flatMap((message) => (Array.isArray(message.content) ? (message.content as Array<{ type: string; image_url?: { url: string } }>).flatMap((part) => (part.type === 'image_url' ? [part.image_url!.url] : [])) : []));
const hasImage = (request: RecordedRequest): boolean => imageUrls(request).length > 0;
const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

function capturingLog() {
  const lines: Array<{ level: number; msg: string; model?: string }> = [];
  const log = pino(
    { level: 'warn' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
        done();
      },
    }),
  );
  return { log, lines };
}

describe('vision provider', () => {
  let workspace: string;
  let fake: FakeOpenAI;
  let photo: Buffer;

  before(async () => {
    workspace = await realpath(await mkdtemp(join(tmpdir(), 'sb-vision-')));
    await mkdir(join(workspace, 'inbox/t/1'), { recursive: true });
    photo = await cameraJpeg(1600, 1200, { orientation: 6 });
    await writeFile(join(workspace, 'inbox/t/1/plant.jpg'), photo);
    for (let n = 2; n <= 6; n++) {
      await mkdir(join(workspace, `inbox/t/${n}`), { recursive: true });
      await writeFile(join(workspace, `inbox/t/${n}/p${n}.jpg`), await cameraJpeg(64 * n, 48 * n));
    }
    await writeFile(join(workspace, 'inbox/t/1/broken.jpg'), photo.subarray(0, 5000));
    await writeFile(join(workspace, 'inbox/t/1/report.png'), Buffer.from('%PDF-1.7 not a png'));
    fake = await startFakeOpenAI();
  });
  after(async () => {
    await fake.close();
    await rm(workspace, { recursive: true, force: true });
  });

  const make = (vision: VisionMode, options: { maxImages?: number; log?: ReturnType<typeof capturingLog>['log']; memory?: ReturnType<typeof createVisionMemory> } = {}) => {
    const inner = createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'text-model', timeoutMs: 5000 });
    return createVisionProvider(inner, {
      vision,
      model: 'text-model',
      limits,
      images: createWorkspaceImages({ workspace, preparer: createImagePreparer() }),
      ...(options.maxImages === undefined ? {} : { maxImages: options.maxImages }),
      memory: options.memory ?? createVisionMemory(),
      log: options.log ?? capturingLog().log,
    });
  };
  const photoTurn = (name = 'plant.jpg', path = `inbox/t/1/${name}`, text = 'what is this plant?'): ChatMessage => ({ role: 'user', content: text, images: [{ type: 'file', path, name }] });
  const request = (...messages: ChatMessage[]): ChatRequest => ({ system: 's', tools: [], messages });

  it('sends the photo downscaled, upright and without EXIF, as a data URL whose bytes hash to the prepared image', async () => {
    const before = fake.requests.length;
    fake.fallback = (recorded) => ({ text: hasImage(recorded) ? 'a fern' : 'no image' });
    const answer = await make('auto').chat(request(photoTurn()), signal());
    assert.equal(answer.text, 'a fern');
    const sent = fake.requests[before]!;
    const [url] = imageUrls(sent);
    const match = /^data:image\/jpeg;base64,(.+)$/.exec(url!);
    assert.ok(match, 'a JPEG data URL');
    const bytes = Buffer.from(match[1]!, 'base64');
    const expected = await createImagePreparer().prepare(photo, limits);
    assert.ok(expected.ok);
    assert.equal(sha(bytes), sha(expected.data));
    const meta = await sharp(bytes).metadata();
    assert.deepEqual([meta.width, meta.height, meta.exif], [384, 512, undefined]);
    const content = contentOf(sent, 1);
    assert.ok(Array.isArray(content));
    assert.deepEqual(content.at(-1), { type: 'text', text: 'what is this plant?' });
  });

  it('auto: an endpoint that refuses images gets the text description instead, remembered per model, logged once', async () => {
    for (const refusal of [OPENAI_REFUSAL, LLAMA_CPP_REFUSAL]) {
      const before = fake.requests.length;
      fake.fallback = (recorded) => (hasImage(recorded) ? refusal : { text: 'answered from the description' });
      const { log, lines } = capturingLog();
      const provider = make('auto', { log });
      const first = await provider.chat(request(photoTurn()), signal());
      assert.equal(first.text, 'answered from the description');
      const tried = fake.requests.slice(before);
      assert.deepEqual(tried.map(hasImage), [true, false]);
      assert.equal(contentOf(tried[1]!, 1), 'what is this plant?');
      // Remembered: the next photo goes straight to the text description; the log said it once.
      await provider.chat(request(photoTurn(), { role: 'assistant', content: 'a fern' }, photoTurn('p2.jpg', 'inbox/t/2/p2.jpg', 'and this?')), signal());
      assert.deepEqual(fake.requests.slice(before).map(hasImage), [true, false, false]);
      const warnings = lines.filter((line) => /refuses image input/.test(line.msg));
      assert.equal(warnings.length, 1);
      assert.equal(warnings[0]!.model, 'text-model');
      // Per model: another model of the same endpoint still gets images.
      await provider.chat({ ...request(photoTurn()), model: 'vision-model' }, signal());
      assert.equal(hasImage(fake.requests.at(-2)!), true);
    }
  });

  it('false never sends images; true lets the refusal through (to the next fallback); other errors pass untouched', async () => {
    fake.fallback = (recorded) => (hasImage(recorded) ? OPENAI_REFUSAL : { text: 'text' });
    let before = fake.requests.length;
    assert.equal((await make(false).chat(request(photoTurn()), signal())).text, 'text');
    assert.deepEqual(fake.requests.slice(before).map(hasImage), [false]);
    before = fake.requests.length;
    assert.equal((await make('auto', { maxImages: 0 }).chat(request(photoTurn()), signal())).text, 'text');
    assert.deepEqual(fake.requests.slice(before).map(hasImage), [false], 'max_images = 0 sends none');
    assert.equal(contentOf(fake.requests.at(-1)!, 1), 'what is this plant?');
    before = fake.requests.length;
    await assert.rejects(make(true).chat(request(photoTurn()), signal()), (error: unknown) => error instanceof ProviderError && error.status === 400 && /image_url is only supported/.test(error.message));
    assert.equal(fake.requests.length, before + 1);
    fake.fallback = () => ({ status: 400, body: JSON.stringify({ error: { message: 'This model\'s maximum context length is 8192 tokens', code: 'context_length_exceeded' } }) });
    await assert.rejects(make('auto').chat(request(photoTurn()), signal()), (error: unknown) => error instanceof ProviderError && error.code === 'context_length');
  });

  it('passes a request without photos through untouched', async () => {
    const seen: ChatRequest[] = [];
    const inner: Provider = { name: 'x', chat: async (r) => (seen.push(r), { text: '', toolCalls: [] }) };
    const provider = createVisionProvider(inner, { vision: 'auto', model: 'm', limits, images: createWorkspaceImages({ workspace, preparer: createImagePreparer() }), memory: createVisionMemory(), log: capturingLog().log });
    const plain = request({ role: 'user', content: 'hi' });
    await provider.chat(plain, signal());
    assert.equal(seen[0], plain);
  });

  it('shows the last N images; older ones, missing files and bad files become one line each, and problems are reported', async () => {
    const seen: ChatRequest[] = [];
    const inner: Provider = { name: 'x', chat: async (r) => (seen.push(r), { text: 'ok', toolCalls: [] }) };
    const provider = createVisionProvider(inner, { vision: 'auto', model: 'm', limits, maxImages: 4, images: createWorkspaceImages({ workspace, preparer: createImagePreparer() }), memory: createVisionMemory(), log: capturingLog().log });
    const problems: Array<[string, string]> = [];
    const history: ChatMessage[] = [];
    for (let n = 2; n <= 6; n++) history.push(photoTurn(`p${n}.jpg`, `inbox/t/${n}/p${n}.jpg`, `photo ${n}`), { role: 'assistant', content: `seen ${n}` });
    const now: ChatMessage = {
      role: 'user',
      content: 'and these?',
      images: [
        { type: 'file', path: 'inbox/t/1/broken.jpg', name: 'broken.jpg' },
        { type: 'file', path: 'inbox/t/1/report.png', name: 'report.png' },
        { type: 'file', path: 'inbox/t/9/gone.jpg', name: 'gone.jpg' },
        { type: 'file', path: '../../etc/passwd', name: 'passwd' },
      ],
    };
    await provider.chat({ ...request(...history, now), onImageProblem: (path, line) => problems.push([path, line]) }, signal());
    const sent = seen[0]!.messages;
    const users = sent.filter((message) => message.role === 'user');
    // Four most recent: the four of this turn (none shown) — so no photo of history either.
    assert.equal(users.flatMap((message) => (message.role === 'user' ? message.images ?? [] : [])).length, 0);
    assert.match(users[0]!.content, /^photo 2\n\[Image p2\.jpg: shown in an earlier turn, no longer shown \(only the 4 most recent images stay in view\)\]$/);
    const last = users.at(-1)!.content;
    assert.match(last, /^and these\?\n/);
    assert.match(last, /\[Image broken\.jpg could not be shown to you: it is damaged or cut short/);
    assert.match(last, /\[Image report\.png could not be shown to you: its contents are not an image/);
    assert.match(last, /\[Image gone\.jpg is no longer in the workspace, so it cannot be shown\]/);
    assert.match(last, /\[Image passwd is no longer in the workspace, so it cannot be shown\]/);
    assert.deepEqual(
      problems.map(([path]) => path),
      ['inbox/t/1/report.png', 'inbox/t/1/broken.jpg'],
    );
    assert.match(problems[1]![1], /^I could not look at broken\.jpg: it is damaged or cut short/);

    // Without this turn's bad files, the last four photos of history are shown, oldest first.
    seen.length = 0;
    await provider.chat(request(...history, { role: 'user', content: 'which was biggest?' }), signal());
    const shown = seen[0]!.messages.flatMap((message, index) => (message.role === 'user' && message.images ? [[index, message.images.map((image) => image.type)]] : []));
    assert.deepEqual(shown, [[2, ['data']], [4, ['data']], [6, ['data']], [8, ['data']]]);
    assert.ok(!('images' in seen[0]!.messages[0]!), 'the oldest photo is a line of text');
  });
});
