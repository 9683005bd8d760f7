/**
 * A photo through the whole turn path: a channel pushes a message with a saved photo, the
 * runtime builds the turn, the agent gives the model an image part (through the vision
 * decorator and the OpenAI wire format, to the scripted model), history keeps the path —
 * never the bytes — and the next turns of that conversation, only that one, see it again.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Attachment } from '../channel.ts';
import { createImagePreparer, IMAGE_LIMITS, type ImageLimits } from '../media/image.ts';
import { createVisionMemory, createVisionProvider } from '../media/vision.ts';
import { createWorkspaceImages } from '../media/workspace-images.ts';
import { createOpenAIProvider } from '../providers/openai.ts';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from '../../test/fixtures/fake-openai.ts';
import { testLogger } from '../../test/support/log.ts';
import { cameraJpeg } from '../../test/support/photos.ts';
import { saveAttachment, startTurnPath } from '../../test/support/turn-path.ts';

const limits: ImageLimits = { ...IMAGE_LIMITS.openai, longEdge: 512 };

type Part = { type: string; text?: string; image_url?: { url: string } };
const userParts = (request: RecordedRequest): Part[][] =>
  request.body.messages.filter((message) => message.role === 'user').map((message) => (Array.isArray(message.content) ? (message.content as Part[]) : [{ type: 'text', text: message.content ?? '' }]));
const imagesIn = (request: RecordedRequest): string[] => userParts(request).flatMap((parts) => parts.flatMap((part) => (part.type === 'image_url' ? [part.image_url!.url] : [])));
const textOfLastUser = (request: RecordedRequest): string => userParts(request).at(-1)!.flatMap((part) => (part.type === 'text' ? [part.text!] : [])).join('\n');
const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

describe('photos through the turn path', () => {
  let workspace: string;
  let fake: FakeOpenAI;
  const dirs: string[] = [];

  before(async () => {
    workspace = await realpath(await mkdtemp(join(tmpdir(), 'sb-photo-ws-')));
    fake = await startFakeOpenAI();
  });
  after(async () => {
    await fake.close();
    for (const dir of [workspace, ...dirs]) await rm(dir, { recursive: true, force: true });
  });

  const save = (id: string, name: string, bytes: Uint8Array, kind: Attachment['kind'] = 'photo', mime = 'image/jpeg'): Promise<Attachment> => saveAttachment(workspace, id, name, bytes, kind, mime);

  function start() {
    const provider = createVisionProvider(createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'm', timeoutMs: 5000 }), {
      vision: 'auto',
      model: 'm',
      limits,
      images: createWorkspaceImages({ workspace, preparer: createImagePreparer() }),
      maxImages: 2,
      memory: createVisionMemory(),
      log: testLogger(),
    });
    return startTurnPath({ workspace, dirs, provider });
  }

  it('a photo with a caption, then one without, reach the model as images; history keeps paths, not bytes', async () => {
    const photo = await cameraJpeg(1600, 1200);
    const second = await cameraJpeg(900, 600);
    const first = await save('p1', 'plant.jpg', photo);
    const next = await save('p2', 'leaf.jpg', second);
    fake.fallback = (request) => ({ text: `saw ${imagesIn(request).length} image(s)` });
    const { channel, runtime, database } = await start();
    try {
      const before = fake.requests.length;
      await channel.inject({ id: 'p1', text: 'what is this plant?', attachments: [first] });
      await channel.waitForSent(1);
      assert.equal(channel.sent[0]!.text, 'saw 1 image(s)');
      const asked = fake.requests[before]!;
      const [url] = imagesIn(asked);
      const expected = await createImagePreparer().prepare(photo, limits);
      assert.ok(expected.ok);
      assert.equal(url, `data:image/jpeg;base64,${expected.data.toString('base64')}`);
      assert.equal(sha(Buffer.from(url!.split(',')[1]!, 'base64')), sha(expected.data));
      assert.match(textOfLastUser(asked), /^what is this plant\?\n\n\[The person attached a file/);

      // No caption: still a turn, with the photo; the earlier photo is shown again from its path.
      await channel.inject({ id: 'p2', text: '', attachments: [next] });
      await channel.waitForSent(2);
      assert.equal(channel.sent[1]!.text, 'saw 2 image(s)');

      const rows = await database.all<{ message: string }>('SELECT message FROM history ORDER BY id');
      const users = rows.map((row) => JSON.parse(row.message) as { role: string; images?: unknown }).filter((message) => message.role === 'user');
      assert.deepEqual(users[0]!.images, [{ type: 'file', path: first.path, name: 'plant.jpg' }]);
      assert.deepEqual(users[1]!.images, [{ type: 'file', path: next.path, name: 'leaf.jpg' }]);
      assert.ok(Math.max(...rows.map((row) => row.message.length)) < 2000, 'no image bytes in the database');

      // The file is gone: the model is told so in a line; the newer photo is still shown.
      await rm(join(workspace, first.path!));
      await channel.inject({ id: 't3', text: 'compare them' });
      await channel.waitForSent(3);
      const third = fake.requests.at(-1)!;
      assert.equal(imagesIn(third).length, 1);
      assert.match(JSON.stringify(third.body.messages), /Image plant\.jpg is no longer in the workspace/);

      // Another conversation never sees this one's photos.
      await channel.inject({ id: 'o1', text: 'what did I send you?', chat: 'chat2', sender: { id: 'someone-else' } });
      await channel.waitForSent(4);
      const other = fake.requests.at(-1)!;
      assert.equal(imagesIn(other).length, 0);
      assert.doesNotMatch(JSON.stringify(other.body.messages), /leaf\.jpg|plant\.jpg/);
    } finally {
      await runtime.stop();
    }
  });

  it('a damaged photo and a mislabelled file: the model and the person each get one line, and the turn is answered', async () => {
    const photo = await cameraJpeg(800, 600);
    const broken = await save('b1', 'broken.jpg', photo.subarray(0, 3000));
    const fakePng = await save('b2', 'chart.png', Buffer.from('%PDF-1.7\n'), 'file', 'image/png');
    const pdf = await save('b3', 'notes.pdf', Buffer.from('%PDF-1.7\n'), 'file', 'application/pdf');
    fake.fallback = (request) => ({ text: `saw ${imagesIn(request).length} image(s)` });
    const { channel, runtime } = await start();
    try {
      await channel.inject({ id: 'b1', text: 'look', attachments: [broken, fakePng, pdf] });
      await channel.waitForSent(1);
      const reply = channel.sent[0]!.text;
      assert.match(reply, /^I could not look at broken\.jpg: it is damaged or cut short[^\n]*\.\n\nI could not look at chart\.png: its contents are not an image[^\n]*\.\n\nsaw 0 image\(s\)$/);
      const asked = JSON.stringify(fake.requests.at(-1)!.body.messages);
      assert.match(asked, /\[Image broken\.jpg could not be shown to you: it is damaged or cut short/);
      assert.doesNotMatch(asked, /Image notes\.pdf/, 'a PDF is not treated as an image');
    } finally {
      await runtime.stop();
    }
  });

  it('an endpoint that refuses images still answers, from the description', async () => {
    const photo = await save('r1', 'cat.jpg', await cameraJpeg(300, 200));
    fake.fallback = (request) =>
      imagesIn(request).length > 0
        ? { status: 400, body: JSON.stringify({ error: { message: 'Invalid content type. image_url is only supported by certain models.', type: 'invalid_request_error', param: null, code: null } }) }
        : { text: `from the description: ${/cat\.jpg \(photo/.test(textOfLastUser(request))}` };
    const { channel, runtime } = await start();
    try {
      await channel.inject({ id: 'r1', text: '', attachments: [photo] });
      await channel.waitForSent(1);
      assert.equal(channel.sent[0]!.text, 'from the description: true');
      assert.ok((await stat(join(workspace, photo.path!))).size > 0);
    } finally {
      await runtime.stop();
    }
  });
});
