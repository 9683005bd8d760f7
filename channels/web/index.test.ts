/**
 * The browser chat channel: an operator's message is pushed like any channel's (with files
 * saved to the workspace), and sends, drafts, edits and files reach only that operator's pages.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AttachmentInput, InboundMessage, ListenLink } from '../../src/channel.ts';
import type { ChatEvent } from '../../src/console/deps.ts';
import { testLogger } from '../../test/support/log.ts';
import { createWebChannel } from './index.ts';
import { testChannelState } from '../../test/support/channel-state.ts';

const link: ListenLink = { ready: () => undefined, alive: () => undefined, deaf: () => undefined };

function setup() {
  const saved: AttachmentInput[] = [];
  const channel = createWebChannel({
    name: 'web',
    log: testLogger(),
    assistantName: 'Bot',
    state: testChannelState(), stateDir: '/tmp',
    attachments: {
      maxBytes: 1024,
      save: async (input) => {
        saved.push(input);
        return { kind: input.kind, name: input.name ?? 'file', size: input.size ?? 0, path: `inbox/web/${input.messageId}/${input.name}` };
      },
    },
  });
  return { channel, saved };
}

describe('web channel', () => {
  it('posts a message tried again with the page’s own id as the same message, scoped to its operator', async () => {
    const { channel } = setup();
    const pushed: InboundMessage[] = [];
    const stop = new AbortController();
    const listening = channel.listen(async (message) => {
      pushed.push(message);
      return 'accepted';
    }, stop.signal, link);
    const first = await channel.post('ada', 'hello', [], 'page-id-0001');
    const again = await channel.post('ada', 'hello', [], 'page-id-0001');
    const other = await channel.post('bob', 'hello', [], 'page-id-0001');
    const fresh = await channel.post('ada', 'hello', []);
    assert.equal(first.id, again.id, 'the same message: the inbox keeps one');
    assert.notEqual(first.id, other.id, 'another operator’s id is another message');
    assert.notEqual(first.id, fresh.id);
    assert.equal(pushed[0]!.id, pushed[1]!.id);
    stop.abort();
    await listening;
  });

  it('pushes an operator’s message with its files, once listening', async () => {
    const { channel, saved } = setup();
    await assert.rejects(channel.post('ada', 'early', []), /not running/);
    const pushed: InboundMessage[] = [];
    const stop = new AbortController();
    const listening = channel.listen(async (message) => {
      pushed.push(message);
      return 'accepted';
    }, stop.signal, link);
    const { id } = await channel.post('ada', 'hello', [{ name: 'a.txt', mime: 'text/plain', data: new TextEncoder().encode('hi') }]);
    assert.equal(pushed.length, 1);
    const message = pushed[0]!;
    assert.equal(message.id, id);
    assert.deepEqual([message.channel, message.account, message.chat, message.sender.id, message.text, message.direct], ['web', 'console', 'ada', 'ada', 'hello', true]);
    assert.equal(message.attachments?.[0]?.path, `inbox/web/${id}/a.txt`);
    assert.equal(saved[0]?.size, 2);
    assert.equal(channel.conversation('ada'), 'web:console:ada');
    stop.abort();
    await listening;
  });

  it('hands sends, drafts, edits and files to that operator only', async () => {
    const { channel } = setup();
    const ada: ChatEvent[] = [];
    const bob: ChatEvent[] = [];
    const stopAda = channel.subscribe('ada', (event) => ada.push(event));
    channel.subscribe('bob', (event) => bob.push(event));
    const ref = { channel: 'web', account: 'console', chat: 'ada' };
    const draftId = await channel.sendDraft({ ...ref, text: 'Hel' });
    await channel.edit(ref, draftId, 'Hello');
    await channel.send({ ...ref, text: 'second' });
    await channel.sendFile(ref, { path: '/tmp/report.pdf', name: 'report.pdf' });
    assert.deepEqual(ada.map((e) => [e.type, e.type === 'file' ? e.name : e.text]), [['draft', 'Hel'], ['draft', 'Hello'], ['message', 'second'], ['file', 'report.pdf']]);
    assert.equal(ada[0]!.id, ada[1]!.id, 'an edit updates the draft it belongs to');
    assert.deepEqual(bob, []);
    const file = ada[3]!;
    assert.equal(file.type, 'file');
    const fileId = file.id;
    assert.deepEqual(channel.file('ada', fileId), { path: '/tmp/report.pdf', name: 'report.pdf' });
    assert.equal(channel.file('bob', fileId), undefined, 'another operator cannot fetch it');
    stopAda();
    await channel.send({ ...ref, text: 'after' });
    assert.equal(ada.length, 4);
  });
});
