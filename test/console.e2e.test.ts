/**
 * The web console in a real browser: Debian's chromium driven by playwright-core against a
 * real daemon (a Telegram peer, the scripted model). Sign in (a wrong token refused), see a
 * channel running, approve a pairing code and see the stranger's next message answered, chat
 * in the browser and watch the reply stream in, forget a memory and see it gone from recall,
 * deny a pending approval, change a config value and reload. A screenshot of every page goes
 * to test/artifacts/ (not committed) — look at them.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { requireServers } from './support/servers.ts';

requireServers('chromium');

const { chromium } = await import('playwright-core');
const { startFakeOpenAI } = await import('./fixtures/fake-openai.ts');
const { startTelegramPeer } = await import('./peers/telegram.ts');
const { startDaemon, tempConfig } = await import('./support/cli.ts');
const { until } = await import('./support/wait.ts');
const { freePort } = await import('./support/net.ts');

type Browser = Awaited<ReturnType<typeof chromium.launch>>;
type Page = Awaited<ReturnType<Browser['newPage']>>;

const token = 'console-e2e-token-0123456789abcdef';
const env = { TEST_MODEL_KEY: 'sk-console', SWITCHBOARD_TOKEN: token };
const artifacts = new URL('./artifacts/', import.meta.url).pathname;
const streamed = 'Streaming reply: one two three four five six seven eight.';
/** Fences the console's markdown once looped forever on, and what must stay text. */
const oddReply = ['Odd fences:', '```c++', 'int main() {}', '```', '````', 'four ticks', '````', '```js title="x"', 'let a = 1;', '```', '[click me](javascript:alert(1)) [data link](data:text/html,hi) <img src=x onerror="alert(1)"> end of reply'].join('\n');

describe('web console (real browser)', () => {
  let model: Awaited<ReturnType<typeof startFakeOpenAI>>;
  let peer: Awaited<ReturnType<typeof startTelegramPeer>>;
  let daemon: ReturnType<typeof startDaemon>;
  let config: ReturnType<typeof tempConfig>;
  let browser: Browser;
  let page: Page;
  let base: string;
  /** Bob is a stranger to the bot: no allow list, so he gets a pairing code. */
  /** Errors the page itself reports: script errors and Content-Security-Policy refusals. */
  const pageProblems: string[] = [];
  const dm = { kind: 'dm' as const, user: 'bob' as const };
  const bobId = '1002';

  const shot = async (name: string, target: Page = page): Promise<void> => {
    await target.screenshot({ path: `${artifacts}${name}.png`, fullPage: true });
  };
  const go = async (hash: string): Promise<void> => {
    await page.goto(`${base}/#/${hash}`);
    await page.locator('main h1').waitFor();
  };
  const systemPrompt = (n: number): string => model.requests[n]?.body.messages.find((m) => m.role === 'system')?.content ?? '';

  before(async () => {
    mkdirSync(artifacts, { recursive: true });
    model = await startFakeOpenAI();
    model.fallback = (request) => {
      if (request.body.messages.at(-1)?.role === 'tool') return { text: 'done with tools' };
      // A turn with a photo is an array of parts (text, image_url) in OpenAI's format: its text is what is read.
      const content: unknown = [...request.body.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
      const last = typeof content === 'string' ? content : (content as Array<{ text?: string }>).map((part) => part.text ?? '').join('\n');
      if (last.includes('odd fences please')) return { text: oddReply };
      if (last.includes('stream please')) return { text: streamed, deltas: streamed.split(/(?<= )/), deltaDelayMs: 250 };
      const saved = /saved at (\S+)/.exec(last);
      if (last.includes('send it back') && saved) return { toolCalls: [{ name: 'send_file', arguments: { path: saved[1]! } }] };
      if (last.includes('list it')) return { toolCalls: [{ name: 'shell', arguments: { command: 'ls' } }] };
      if (last.includes('touch it')) return { toolCalls: [{ name: 'shell', arguments: { command: 'touch approved.txt' } }] };
      return { text: `echo: ${last.split('\n').at(-1)}` };
    };
    peer = await startTelegramPeer();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    config = tempConfig(
      model.baseUrl,
      `[log]\nformat = "json"\n[memory]\nmin_relevance = 0.01\n[security]\nautonomy = "supervised"\n[gateway]\nlisten = "127.0.0.1:${port}"\ntoken = "\${SWITCHBOARD_TOKEN}"\n${peer.configSection()}`,
    );
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'], timeout: 20_000 });
    page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    page.setDefaultTimeout(15_000);
    page.on('pageerror', (error) => pageProblems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) pageProblems.push(`console error: ${message.text()}`);
    });
  });
  after(async () => {
    // The daemon's log beside the screenshots: what to read when a step failed in CI.
    if (daemon) writeFileSync(`${artifacts}daemon.log`, `${daemon.stdout()}\n--- stderr ---\n${daemon.stderr()}`);
    await browser?.close();
    daemon?.child.kill('SIGTERM');
    await daemon?.exited;
    config?.cleanup();
    await peer?.close();
    await model?.close();
  });

  it('signs in (a wrong token is refused) and shows the channel running', async () => {
    assert.doesNotMatch(daemon.stdout(), /web console loaded/, 'nothing of the console is loaded before its first request');
    await page.goto(base);
    await page.getByLabel('Gateway token').fill('not-the-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'wrong token' }).waitFor();
    await shot('signin');
    await page.getByLabel('Your name').fill('ada');
    await page.getByLabel('Gateway token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const telegram = page.locator('[data-channel="telegram"]');
    await telegram.locator('.badge', { hasText: 'running' }).waitFor();
    await page.locator('[data-channel="web"] .badge', { hasText: 'running' }).waitFor();
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'sb_session');
    assert.ok(session?.httpOnly, 'the session cookie is HttpOnly');
    assert.equal(session?.sameSite, 'Strict');
    assert.ok(!(await page.content()).includes(token), 'the token never reaches the page');
    await shot('overview');
  });

  it('approves a pairing code, and the stranger’s next message is answered', async () => {
    await peer.post('bob', dm, 'hello, who are you?');
    await until(() => peer.botMessages(dm).some((m) => /pairing/i.test(m.text)), 'the pairing code reply');
    await go('access');
    const row = page.locator('tr[data-code]');
    await row.waitFor();
    await shot('access');
    await page.getByRole('button', { name: `Approve ${bobId} on telegram` }).click();
    await page.getByText(`Approved ${bobId} on telegram`).waitFor();
    await row.waitFor({ state: 'detached' });
    await page.getByRole('button', { name: `Revoke ${bobId} on telegram` }).waitFor();
    await peer.post('bob', dm, 'now can we talk');
    await until(() => peer.botMessages(dm).some((m) => m.text.includes('echo: now can we talk')), 'the answer to the approved stranger');
  });

  it('draws the first turns’ latency inside the Turn latency chart, visibly (a lone minute is a stroke, not a cut dot)', async () => {
    await go('overview');
    const chart = page.locator('figure.chart', { hasText: 'Turn latency' });
    const marks = chart.locator('line.lone, polyline.line, circle');
    // Attached, not "visible": a horizontal stroke's box is 0 px high to playwright (its geometry), though it paints 2 px.
    await marks.first().waitFor({ state: 'attached' });
    const frame = (await chart.locator('svg').boundingBox())!;
    for (const mark of await marks.all()) {
      const box = (await mark.boundingBox())!;
      assert.ok(box.width >= 8, `drawn ${box.width} px wide`);
      assert.ok(box.x >= frame.x && box.x + box.width <= frame.x + frame.width + 0.5, `inside the chart: ${JSON.stringify({ box, frame })}`);
      assert.ok(box.y >= frame.y + 1 && box.y + box.height <= frame.y + frame.height - 1, `inside the chart, its 2 px stroke too: ${JSON.stringify({ box, frame })}`);
    }
    if ((await chart.locator('polyline.line').count()) === 0) await chart.getByText(/one minute so far: p50 \d/).waitFor();
  });

  it('chats in the browser and the reply streams in', async () => {
    await go('chat');
    await page.getByLabel('Message').fill('stream please');
    await page.getByLabel('Message').press('Enter');
    const streaming = page.locator('.bubble.assistant.streaming');
    await streaming.waitFor();
    const partial = (await streaming.innerText()).trim();
    assert.ok(partial.length < streamed.length, `saw a partial reply while it was written: ${JSON.stringify(partial)}`);
    await page.locator('.bubble.assistant', { hasText: streamed }).waitFor();
    // Files both ways: one goes up with a message, the agent sends it back as a download.
    await page.locator('input[type="file"]').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('file from the browser\n') });
    await page.getByLabel('Message').fill('please send it back');
    await page.getByRole('button', { name: 'Send' }).click();
    const link = page.locator('a[download="notes.txt"]');
    await link.waitFor();
    const download = await page.request.get(new URL((await link.getAttribute('href'))!, base).href);
    assert.equal(await download.text(), 'file from the browser\n');
    await page.locator('.bubble.assistant', { hasText: 'done with tools' }).waitFor();
    // An image the agent sends is drawn as a picture (from the same file URL), with its name to download.
    const { chartPng } = await import('./support/outbound-images.ts');
    await page.locator('input[type="file"]').setInputFiles({ name: 'chart.png', mimeType: 'image/png', buffer: await chartPng(64, 48) });
    await page.getByLabel('Message').fill('please send it back');
    await page.getByRole('button', { name: 'Send' }).click();
    const picture = page.locator('.bubble.assistant figure.picture img[alt="chart.png"]');
    await picture.waitFor();
    await until(() => picture.evaluate((img) => { const i = img as unknown as { complete: boolean; naturalWidth: number; naturalHeight: number }; return i.complete && i.naturalWidth === 64 && i.naturalHeight === 48; }), 'the picture decoded in the page');
    await page.locator('.bubble.assistant figure.picture a[download="chart.png"]').waitFor();
    await shot('chat');
  });

  it('sends a message again with the same id after the answer to its post was lost, and it is answered once', async () => {
    await go('chat');
    const ids: string[] = [];
    let lose = true;
    await page.route('**/api/console/chat', async (route) => {
      ids.push((JSON.parse(route.request().postData() ?? '{}') as { id: string }).id);
      const response = await route.fetch(); // the server takes it (stored)…
      if (lose) {
        lose = false;
        await route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: 'the answer was lost on the way' }) }); // …the page is told it failed
      } else await route.fulfill({ response });
    });
    try {
      await page.getByLabel('Message').fill('answer me once');
      await page.getByLabel('Message').press('Enter');
      await page.getByRole('alert').filter({ hasText: 'the answer was lost' }).waitFor();
      await page.getByRole('button', { name: 'Send' }).click(); // the person sends it again
      await page.locator('.bubble.assistant', { hasText: 'echo: answer me once' }).first().waitFor();
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.equal(ids.length, 2);
      assert.ok(ids[0] && ids[0] === ids[1], `the same id both times: ${JSON.stringify(ids)}`);
      assert.equal(await page.locator('.bubble.assistant', { hasText: 'echo: answer me once' }).count(), 1, 'answered once');
    } finally {
      await page.unroute('**/api/console/chat');
    }
  });

  it('renders any fence in a reply, and unsafe links and raw HTML as text', async () => {
    await go('chat');
    await page.getByLabel('Message').fill('odd fences please');
    await page.getByLabel('Message').press('Enter');
    const bubble = page.locator('.bubble.assistant', { hasText: 'end of reply' });
    await bubble.waitFor({ timeout: 10_000 });
    assert.deepEqual(await bubble.locator('pre code').allInnerTexts(), ['int main() {}', 'four ticks', 'let a = 1;']);
    assert.equal(await bubble.locator('a').count(), 0, 'no javascript: or data: link');
    assert.equal(await bubble.locator('img').count(), 0, 'raw HTML is not markup');
    assert.match(await bubble.innerText(), /\[click me\]\(javascript:alert\(1\)\).*<img src=x onerror="alert\(1\)">/s);
    await shot('chat-markdown');
  });

  it('forgets a memory, and it is gone from recall', async () => {
    await go('memory');
    await page.getByLabel('Shared memory').fill('The zebra in the garden is called Zanzibar');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await page.locator('.memories .content', { hasText: 'Zanzibar' }).waitFor();
    await shot('memory');
    const ask = async (): Promise<number> => {
      const n = model.requests.length;
      await go('chat');
      await page.getByLabel('Message').fill('what is the zebra called');
      await page.getByLabel('Message').press('Enter');
      await model.waitForRequests(n + 1);
      await page.locator('.bubble.assistant', { hasText: 'echo: what is the zebra called' }).last().waitFor();
      return n;
    };
    assert.match(systemPrompt(await ask()), /Zanzibar/, 'recalled before forgetting');
    await go('memory');
    const card = page.locator('.memories li', { hasText: 'Zanzibar' });
    await card.getByRole('button', { name: /^Forget/ }).click();
    await card.waitFor({ state: 'detached' });
    assert.doesNotMatch(systemPrompt(await ask()), /Zanzibar/, 'not recalled after forgetting');
  });

  it('denies a pending tool approval', async () => {
    await peer.post('bob', dm, 'please touch it');
    await until(() => peer.botMessages(dm).some((m) => m.text.includes('I need your approval')), 'the approval question');
    await go('approvals');
    const card = page.locator('[data-conversation]');
    await card.getByText('touch approved.txt').first().waitFor();
    await shot('approvals');
    await page.getByRole('button', { name: `Deny the tool call asked by ${bobId}` }).click();
    await card.waitFor({ state: 'detached' });
    await page.getByText('No tool call is waiting for approval.').waitFor();
    // The person's "yes" now runs nothing: the question is gone.
    await peer.post('bob', dm, 'yes');
    await until(() => peer.botMessages(dm).some((m) => m.text === 'echo: yes'), 'yes answered as an ordinary message');
  });

  it('validates an edited config, saves it with a .bak and reloads', async () => {
    await go('config');
    const editor = page.getByLabel('Config file');
    // The file arrives after the page: wait for it before editing.
    // (Polled from here: a string evaluated in the page would be refused by the console's CSP, rightly.)
    for (const deadline = Date.now() + 10_000; !(await editor.inputValue()).includes('[gateway]'); ) {
      assert.ok(Date.now() < deadline, 'the config file never arrived in the editor');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const original = await editor.inputValue();
    const telegramToken = /token = "([^"$]+)"/.exec(peer.configSection())![1]!;
    assert.ok(!original.includes(telegramToken) && !original.includes(token), 'no secret in the editor');
    await editor.fill(original.replace('history_turns', 'history_turns').replace('name = "Testbot"', 'name = 5'));
    await page.getByRole('button', { name: 'Validate' }).click();
    await page.locator('.problems', { hasText: 'agent.name' }).waitFor();
    await editor.fill(original.replace('name = "Testbot"', 'name = "Renamedbot"'));
    await page.getByRole('button', { name: 'Save and reload' }).click();
    await page.getByTestId('config-message').filter({ hasText: 'Reloaded' }).waitFor();
    assert.match(readFileSync(config.file, 'utf8'), /name = "Renamedbot"/);
    assert.ok(readFileSync(config.file, 'utf8').includes(`token = "${telegramToken}"`), 'the masked secret was put back on save');
    assert.match(readFileSync(`${config.file}.bak`, 'utf8'), /name = "Testbot"/);
    await shot('config');
  });

  it('shows conversations with their transcript, tools, and the live log', async () => {
    await peer.post('bob', dm, 'please list it');
    await until(() => peer.botMessages(dm).some((m) => m.text === 'done with tools'), 'the answer after the tool call');
    await go('conversations');
    await page.getByRole('button', { name: /telegram:/ }).first().click();
    const tool = page.locator('.transcript details.tool', { hasText: 'shell' });
    await tool.waitFor();
    assert.equal(await tool.getAttribute('open'), null, 'tool calls are collapsed');
    await tool.locator('summary').click();
    await tool.getByText('"command":"ls"').waitFor();
    await shot('conversation-transcript');
    await go('conversations');
    await page.getByLabel('Search history').fill('ZEBRA');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.locator('.hits li', { hasText: 'web:console:ada' }).first().waitFor();
    await shot('conversations');
    await go('tools');
    await page.getByText('shell', { exact: true }).first().waitFor();
    await shot('tools');
    await go('logs');
    await page.locator('.logs li').first().waitFor();
    // A new line arrives live while the page is open.
    await peer.post('bob', dm, 'a line for the log');
    await page.locator('.logs li', { hasText: 'turn done' }).first().waitFor();
    await shot('logs');
    await go('overview');
    await page.getByRole('button', { name: 'Restart telegram' }).click();
    await page.locator('[data-channel="telegram"] dd', { hasText: /^1$/ }).waitFor();
    await page.locator('[data-channel="telegram"] .badge', { hasText: 'running' }).waitFor();
    await shot('overview-after-traffic');
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, colorScheme: 'dark' });
    await phone.context().addCookies(await page.context().cookies());
    await phone.goto(`${base}/#/overview`);
    await phone.locator('[data-channel="telegram"]').waitFor();
    await shot('overview-phone-dark', phone);
    await phone.close();
    assert.ok(existsSync(`${artifacts}overview.png`));
    // The wrong token's 401 is the one failed load; nothing broke the CSP or threw.
    assert.deepEqual(pageProblems, []);
  });
});
