/**
 * The browser chat as a channel that counts, in a real browser (Debian's chromium driven by
 * playwright-core) against a real daemon whose only way in is the console: no channel table,
 * just `[gateway]` (console on by default). The daemon starts and is ready with the `web`
 * channel, and the chat answers (the scripted model). A command's reply is drawn below the
 * command — also when the reply reaches the page before the answer to its post does — and the
 * conversation reads in the same order after a reload, commands and their replies included. A
 * photo picked in the page (with text, and alone) reaches the model as an image part whose bytes
 * are what the image preparer makes of it.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { requireServers } from './support/servers.ts';

requireServers('chromium');

const { chromium } = await import('playwright-core');
const { startFakeOpenAI } = await import('./fixtures/fake-openai.ts');
const { startDaemon, tempConfig } = await import('./support/cli.ts');
const { freePort } = await import('./support/net.ts');
const { cameraJpeg } = await import('./support/photos.ts');
const { createImagePreparer, IMAGE_LIMITS } = await import('../src/media/image.ts');
const sha256 = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

type Browser = Awaited<ReturnType<typeof chromium.launch>>;
type Page = Awaited<ReturnType<Browser['newPage']>>;

describe('the browser chat as the only channel (real browser)', () => {
  let model: Awaited<ReturnType<typeof startFakeOpenAI>>;
  let daemon: ReturnType<typeof startDaemon>;
  let config: ReturnType<typeof tempConfig>;
  let browser: Browser;
  let page: Page;
  let base: string;
  const pageProblems: string[] = [];

  /** The conversation as drawn, top to bottom: [role, text]. */
  const drawn = async (): Promise<Array<[string, string]>> => {
    const bubbles = page.locator('ol.messages > li.bubble');
    const texts = await bubbles.allInnerTexts();
    const roles = await Promise.all(texts.map((_, i) => bubbles.nth(i).getAttribute('data-role')));
    return texts.map((text, i) => [roles[i] ?? '', text.trim()]);
  };
  const say = async (text: string): Promise<void> => {
    await page.getByLabel('Message').fill(text);
    await page.getByLabel('Message').press('Enter');
  };
  const answered = (text: string | RegExp) => page.locator('ol.messages > li.bubble.assistant:not(.streaming)', { hasText: text }).waitFor();

  before(async () => {
    model = await startFakeOpenAI();
    model.fallback = (request) => {
      const last = [...request.body.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
      return { text: `echo: ${last}` };
    };
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // No channel table at all: the console (on by default) is the only way in.
    config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n[gateway]\nlisten = "127.0.0.1:${port}"\n`);
    daemon = startDaemon(['start', '--config', config.file], { env: { TEST_MODEL_KEY: 'sk-web' } });
    await Promise.race([
      daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000),
      daemon.exited.then(({ code }) => assert.fail(`the daemon exited (${code}) instead of starting:\n${daemon.stderr()}${daemon.stdout()}`)),
    ]);
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'], timeout: 20_000 });
    page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
    page.setDefaultTimeout(15_000);
    page.on('pageerror', (error) => pageProblems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') pageProblems.push(`console error: ${message.text()}`);
    });
  });
  after(async () => {
    await browser?.close();
    daemon?.child.kill('SIGTERM');
    await daemon?.exited;
    config?.cleanup();
    await model?.close();
  });

  it('starts with only the console on, is ready with the web channel, and the browser chat answers', async () => {
    const ready = daemon
      .stdout()
      .split('\n')
      .filter((line) => line.includes('"msg":"ready"'))
      .map((line) => JSON.parse(line) as { level: number; channels: string[]; notRunning?: unknown });
    assert.equal(ready.length, 1);
    assert.deepEqual(ready[0]!.channels, ['web']);
    assert.equal(ready[0]!.level, 30, 'ready at info: every channel runs');
    const readyz = await fetch(`${base}/readyz`);
    assert.equal(readyz.status, 200);
    assert.deepEqual(await readyz.json(), { ready: true });
    await page.goto(base);
    await page.getByLabel('Your name').fill('ada');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-channel="web"] .badge', { hasText: 'running' }).waitFor();
    await page.goto(`${base}/#/chat`);
    await say('hello there');
    await answered('echo: hello there');
    assert.deepEqual(await drawn(), [
      ['user', 'hello there'],
      ['assistant', 'echo: hello there'],
    ]);
  });

  it('draws a command’s reply below the command, and keeps the order after a reload', async () => {
    await page.goto(`${base}/#/chat`);
    await answered('echo: hello there');
    // The answer to the post comes late (a slow network): the reply reaches the page first, over the event stream.
    await page.route('**/api/console/chat', async (route) => {
      const response = await route.fetch();
      await new Promise((resolve) => setTimeout(resolve, 600));
      await route.fulfill({ response });
    });
    try {
      await say('/status');
      await answered(/^Up .* channels: web running/);
      await page.getByRole('button', { name: 'Send', disabled: false }).waitFor(); // the post answered
    } finally {
      await page.unroute('**/api/console/chat');
    }
    await say('and after the status?');
    await answered('echo: and after the status?');
    const expected = (status: string): Array<[string, string]> => [
      ['user', 'hello there'],
      ['assistant', 'echo: hello there'],
      ['user', '/status'],
      ['assistant', status],
      ['user', 'and after the status?'],
      ['assistant', 'echo: and after the status?'],
    ];
    const live = await drawn();
    const status = live[3]?.[1] ?? '';
    assert.match(status, /^Up .* channels: web running/);
    assert.deepEqual(live, expected(status), 'live: each reply below what it answers');
    await page.reload();
    await answered('echo: and after the status?');
    assert.deepEqual(await drawn(), expected(status), 'after a reload: the same order, the command and its reply included');
    assert.deepEqual(pageProblems, []);
  });

  it('sends a photo picked in the chat page to the model as an image part, with the text', async () => {
    const photo = await cameraJpeg(800, 600);
    const prepared = await createImagePreparer().prepare(photo, IMAGE_LIMITS.openai);
    assert.ok(prepared.ok);
    const before = model.requests.length;
    model.script({ text: 'That is a fern.' });
    await page.goto(`${base}/#/chat`);
    await answered('echo: and after the status?');
    await page.locator('input[type="file"]').setInputFiles({ name: 'plant.jpg', mimeType: 'image/jpeg', buffer: photo });
    await page.getByText('plant.jpg').waitFor();
    await say('what plant is this?');
    await answered('That is a fern.');
    const request = model.requests[before]!;
    const content: unknown = [...request.body.messages].reverse().find((m) => m.role === 'user')!.content;
    assert.ok(Array.isArray(content), `the message carries parts: ${JSON.stringify(content).slice(0, 300)}`);
    const parts = content as Array<{ type: string; text?: string; image_url?: { url: string } }>;
    const images = parts.flatMap((part) => (part.type === 'image_url' ? [part.image_url!.url] : []));
    assert.equal(images.length, 1, 'one image part');
    assert.equal(sha256(Buffer.from(images[0]!.replace(/^data:image\/jpeg;base64,/, ''), 'base64')), sha256(prepared.data), 'the prepared bytes of the photo picked in the page');
    assert.match(parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join(''), /what plant is this\?/, 'the text goes with it');

    // A photo alone, no text: still a turn.
    model.script({ text: 'The same fern.' });
    await page.locator('input[type="file"]').setInputFiles({ name: 'again.jpg', mimeType: 'image/jpeg', buffer: photo });
    await page.getByText('again.jpg').waitFor();
    await page.getByRole('button', { name: 'Send', disabled: false }).click();
    await answered('The same fern.');
    const alone: unknown = [...model.requests.at(-1)!.body.messages].reverse().find((m) => m.role === 'user')!.content;
    assert.ok(Array.isArray(alone) && (alone as Array<{ type: string }>).some((part) => part.type === 'image_url'), 'the photo without text reached the model');
    assert.deepEqual(pageProblems, []);
  });
});
