import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { decryptAttachment, encryptAttachment, parseEncryptedFile } from './attachment-crypto.ts';

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(Buffer.from(part));
  return Buffer.concat(parts);
}
async function* chunks(data: Buffer, size: number): AsyncIterable<Uint8Array> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

describe('encrypted attachments (AES-256-CTR, SHA-256 of the ciphertext)', () => {
  it('encrypts for the event and decrypts a download streamed in pieces', async () => {
    const data = randomBytes(100_000);
    const { data: ciphertext, keys } = encryptAttachment(data);
    assert.notDeepEqual(ciphertext, data);
    assert.equal(ciphertext.length, data.length);
    assert.equal(keys.key.alg, 'A256CTR');
    assert.equal(Buffer.from(keys.iv, 'base64').subarray(8).equals(Buffer.alloc(8)), true, 'the counter half of the IV starts at zero');
    assert.equal(keys.hashes.sha256, createHash('sha256').update(ciphertext).digest('base64').replace(/=+$/, ''));
    const file = parseEncryptedFile({ ...keys, url: 'mxc://localhost/abc' });
    assert.ok(file);
    assert.deepEqual(await collect(decryptAttachment(chunks(ciphertext, 7_000), file)), data);
  });

  it('refuses a download that is not what the sender hashed', async () => {
    const { data: ciphertext, keys } = encryptAttachment(Buffer.from('the real file'));
    ciphertext[3] = (ciphertext[3] ?? 0) ^ 1;
    await assert.rejects(collect(decryptAttachment(chunks(ciphertext, 4), keys)), /does not match its hash/);
  });

  it('reads only a usable EncryptedFile', () => {
    const { keys } = encryptAttachment(Buffer.from('x'));
    assert.equal(parseEncryptedFile(undefined), undefined);
    assert.equal(parseEncryptedFile({ ...keys }), undefined, 'no url');
    assert.equal(parseEncryptedFile({ ...keys, url: 'mxc://a/b', key: { ...keys.key, k: 'c2hvcnQ' } }), undefined, 'a short key');
    assert.equal(parseEncryptedFile({ ...keys, url: 'mxc://a/b', key: { ...keys.key, alg: 'A128CBC' } }), undefined, 'another algorithm');
  });
});
