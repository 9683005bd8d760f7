import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Attachment, AttachmentInput, AttachmentStore, InboundMessage } from '../channel.ts';
import { withAttachments } from './with-attachments.ts';

const message: InboundMessage = { channel: 'chat', account: 'bot', chat: 'c1', id: 'm1', sender: { id: 'u1' }, text: 'hi', timestamp: 0 };

function store(): AttachmentStore & { inputs: AttachmentInput[]; active: number; most: number } {
  const recorded = {
    maxBytes: 1024,
    inputs: [] as AttachmentInput[],
    active: 0,
    most: 0,
    async save(input: AttachmentInput): Promise<Attachment> {
      recorded.inputs.push(input);
      recorded.active++;
      recorded.most = Math.max(recorded.most, recorded.active);
      await new Promise((resolve) => setTimeout(resolve, 5));
      recorded.active--;
      return { kind: input.kind, name: input.name ?? 'file', size: 1, path: `inbox/${input.name}` };
    },
  };
  return recorded;
}

describe('withAttachments', () => {
  it('returns the message unchanged when it has no files', async () => {
    const saved = store();
    assert.equal(await withAttachments(saved, message, [], () => assert.fail('no file')), message);
  });

  it('saves under the message channel and id, in order, all at once by default', async () => {
    const saved = store();
    const result = await withAttachments(saved, message, ['a', 'b'], (name, i) => ({ kind: 'file', name: `${name}${i}`, download: async () => new Uint8Array() }));
    assert.deepEqual(saved.inputs.map((input) => [input.channel, input.messageId, input.name]), [['chat', 'm1', 'a0'], ['chat', 'm1', 'b1']]);
    assert.deepEqual(result.attachments?.map((a) => a.path), ['inbox/a0', 'inbox/b1']);
    assert.equal(saved.most, 2);
  });

  it('saves one after another when asked', async () => {
    const saved = store();
    await withAttachments(saved, message, ['a', 'b', 'c'], async (name) => ({ kind: 'file', name, download: async () => new Uint8Array() }), { oneByOne: true });
    assert.equal(saved.most, 1);
    assert.deepEqual(saved.inputs.map((input) => input.name), ['a', 'b', 'c']);
  });
});
