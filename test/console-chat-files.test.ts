/**
 * Files through the browser chat, end to end on loopback: the console's API, the real web
 * channel and the real attachment store in a temporary workspace. An upload's name cannot
 * leave its message's folder (`../../x`, ` ..`, `. .`), and what the model is told stays
 * relative to the workspace; a file over the 8 MB limit is refused by the server with 413, not
 * only by the page; a file the agent sends downloads whatever its name's script
 * (`filename*=UTF-8''…`, RFC 6266); and a download id is random and good only for its operator.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, normalize } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { createWebChannel, type WebChannel } from '../channels/web/index.ts';
import type { InboundMessage } from '../src/channel.ts';
import type { ChatEvent } from '../src/console/deps.ts';
import { createConsole } from '../src/console/server.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { testChannelState } from './support/channel-state.ts';
import { fakeConsoleDeps } from './support/console-deps.ts';

const token = 'console-files-token-0123456789';
const megabyte = 1024 * 1024;

describe('console chat files (loopback)', () => {
  let workspace: string;
  let server: Server;
  let base: string;
  let channel: WebChannel;
  const pushed: InboundMessage[] = [];
  const stop = new AbortController();
  let listening: Promise<void>;

  before(async () => {
    workspace = mkdtempSync(join(tmpdir(), 'sb-console-files-'));
    channel = createWebChannel({ name: 'web', log: pino({ level: 'silent' }), assistantName: 'Bot', state: testChannelState(), stateDir: '', attachments: createAttachmentStore({ workspace }) });
    listening = channel.listen(async (message) => (pushed.push(message), 'accepted'), stop.signal, { ready: () => undefined, alive: () => undefined, deaf: () => undefined });
    const deps = fakeConsoleDeps(token, { staticDir: workspace, chat: channel });
    const handler = createConsole(deps);
    server = createServer((request, response) => void handler(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    stop.abort();
    await listening;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(workspace, { recursive: true, force: true });
  });
  beforeEach(() => {
    pushed.length = 0;
  });

  async function signIn(name: string): Promise<Record<string, string>> {
    const response = await fetch(`${base}/api/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token, name }) });
    assert.equal(response.status, 200);
    const { csrf } = (await response.json()) as { csrf: string };
    return { cookie: (response.headers.get('set-cookie') ?? '').split(';')[0]!, 'x-csrf-token': csrf };
  }
  const send = (session: Record<string, string>, files: Array<{ name: string; data: Buffer }>): Promise<Response> =>
    fetch(`${base}/api/console/chat`, {
      method: 'POST',
      headers: { ...session, 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'files', files: files.map((file) => ({ name: file.name, data: file.data.toString('base64') })) }),
    });

  it('keeps every upload inside its message’s folder, and the model’s note relative', async () => {
    const session = await signIn('ada');
    const names = [' ..', '.. ', ' . ', '. .', '\t..', '../../etc/passwd', '..\\..\\boot.ini', '.', '..'];
    // (one per message: two names that both fall back to "file.bin" would share a path)
    for (const name of names) assert.equal((await send(session, [{ name, data: Buffer.from(`x${name}`) }])).status, 202);
    const attachments = pushed.flatMap((message) => message.attachments ?? []);
    assert.equal(attachments.length, names.length);
    for (const [i, attachment] of attachments.entries()) {
      const shown = JSON.stringify(attachment);
      assert.ok(!shown.includes(workspace), `no absolute path reaches the model: ${shown}`);
      assert.ok(attachment.path, `${JSON.stringify(names[i])} was saved: ${shown}`);
      const path = normalize(attachment.path);
      assert.match(path, /^inbox\/web\/[^/]+\/[^/]+$/, `${JSON.stringify(names[i])} stays in its message's folder: ${path}`);
      assert.ok(!/^[\s.]*$/.test(attachment.name), `a real name, not ${JSON.stringify(attachment.name)}`);
      assert.equal(readFileSync(join(workspace, path), 'utf8'), `x${names[i]}`);
    }
    assert.equal(existsSync(join(workspace, 'inbox', 'etc')), false);
  });

  it('refuses a file over 8 MB with 413 on the server, before anything is saved', async () => {
    const session = await signIn('ada');
    const big = await send(session, [{ name: 'small.txt', data: Buffer.from('ok') }, { name: 'big.bin', data: Buffer.alloc(8 * megabyte + 1) }]);
    assert.equal(big.status, 413);
    assert.match(((await big.json()) as { error: string }).error, /big\.bin is larger than 8 MB/);
    assert.deepEqual(pushed, [], 'nothing was posted');
    const limit = await send(session, [{ name: 'limit.bin', data: Buffer.alloc(8 * megabyte) }]);
    assert.equal(limit.status, 202, 'exactly 8 MB is taken');
  });

  it('downloads a file whose name is not Latin-1, with an RFC 6266 filename*', async () => {
    const events: ChatEvent[] = [];
    const unsubscribe = channel.subscribe('ada', (event) => events.push(event));
    const file = join(workspace, 'report.txt');
    writeFileSync(file, 'отчёт\n');
    const name = 'отчёт "final" 📄.txt';
    await channel.sendFile({ channel: 'web', account: 'console', chat: 'ada' }, { path: file, name });
    unsubscribe();
    const event = events.find((e) => e.type === 'file');
    assert.ok(event?.type === 'file');
    const session = await signIn('ada');
    const response = await fetch(new URL(event.url, base), { headers: { cookie: session.cookie! } });
    assert.equal(response.status, 200);
    assert.equal(await response.text(), 'отчёт\n');
    const disposition = response.headers.get('content-disposition') ?? '';
    assert.match(disposition, /^attachment; filename="[\x20-\x7e]+"; filename\*=UTF-8''/);
    const encoded = /filename\*=UTF-8''(\S+)$/.exec(disposition)![1]!;
    assert.match(encoded, /^[A-Za-z0-9!#$&+.^_`|~%-]+$/, 'only RFC 5987 attr-chars and percent escapes');
    assert.equal(decodeURIComponent(encoded), name);
  });

  it('gives random download ids, good only for the operator they were sent to', async () => {
    const events: ChatEvent[] = [];
    const unsubscribe = channel.subscribe('ada', (event) => events.push(event));
    const file = join(workspace, 'secret.txt');
    writeFileSync(file, 'for ada\n');
    for (let i = 0; i < 2; i++) await channel.sendFile({ channel: 'web', account: 'console', chat: 'ada' }, { path: file, name: 'secret.txt' });
    unsubscribe();
    const urls = events.flatMap((e) => (e.type === 'file' ? [e.url] : []));
    const ids = urls.map((url) => new URL(url, base).searchParams.get('id')!);
    assert.equal(new Set(ids).size, 2);
    assert.ok(ids.every((id) => /^[A-Za-z0-9_-]{12,}$/.test(id)), `random ids: ${ids.join(' ')}`);
    const ada = await signIn('ada');
    const bob = await signIn('bob');
    assert.equal((await fetch(new URL(urls[0]!, base), { headers: { cookie: ada.cookie! } })).status, 200);
    assert.equal((await fetch(new URL(urls[0]!, base), { headers: { cookie: bob.cookie! } })).status, 404, 'another operator gets nothing');
    assert.equal((await fetch(`${base}/api/console/chat/file?id=${ids[0]!.slice(0, -1)}x`, { headers: { cookie: ada.cookie! } })).status, 404);
    assert.equal((await fetch(new URL(urls[0]!, base))).status, 401, 'nothing without a session');
  });
});
