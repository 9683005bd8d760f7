/**
 * Matrix, outbound images: a PNG the model sends with send_file is an `m.image` with
 * info {mimetype, size, w, h} (shown inline by clients); a PDF stays an `m.file`. The peer
 * (test/peers/matrix.ts, botUploads) checks each event against the spec's event schemas and the
 * media it points at.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startMatrixPeer, type MatrixPeer } from './peers/matrix.ts';
import { byName, chartPng, dm, modelSends, pdf, startForPeer, type OutboundRun } from './support/outbound-images.ts';

describe('matrix: images the model sends', () => {
  let peer: MatrixPeer;
  let model: FakeOpenAI;
  let run: OutboundRun;
  before(async () => {
    model = await startFakeOpenAI();
    peer = await startMatrixPeer();
    run = await startForPeer(peer, model, { TEST_MODEL_KEY: 'sk-matrix' });
  });
  after(async () => {
    await run?.stop();
    await peer?.close();
    await model?.close();
  });

  it('sends a PNG as an m.image with its size and dimensions, and a PDF as an m.file', async () => {
    const png = await chartPng(64, 48);
    await modelSends(peer, model, run, { 'chart.png': png, 'report.pdf': pdf });
    const uploads = byName(await peer.botUploads(dm), (upload) => String(upload.content.body));
    assert.deepEqual(uploads.map(({ content, problems }) => ({ msgtype: content.msgtype, body: content.body, info: content.info, problems })), [
      { msgtype: 'm.image', body: 'chart.png', info: { mimetype: 'image/png', size: png.length, w: 64, h: 48 }, problems: [] },
      { msgtype: 'm.file', body: 'report.pdf', info: { mimetype: 'application/pdf', size: pdf.length }, problems: [] },
    ]);
  });

  it('sends an image by its bytes, whatever its name says', async () => {
    const png = await chartPng(30, 20);
    await modelSends(peer, model, run, { 'plot.dat': png });
    const last = (await peer.botUploads(dm)).at(-1)!;
    assert.equal(last.content.msgtype, 'm.image');
    assert.deepEqual(last.content.info, { mimetype: 'image/png', size: png.length, w: 30, h: 20 });
    assert.deepEqual(last.problems, []);
  });
});
