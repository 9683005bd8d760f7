/**
 * Telegram, outbound images: a PNG the model sends with send_file arrives as a photo
 * (sendPhoto, shown inline); a PDF, a PNG over sendPhoto's 10 MB and one whose sides are more
 * than 20:1 arrive as documents; a GIF as an animation. The peer (test/peers/telegram.ts)
 * enforces sendPhoto's limits as Telegram does.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startTelegramPeer, type TelegramPeer } from './peers/telegram.ts';
import { byName, chartPng, dm, heavyPng, modelSends, pdf, startForPeer, type OutboundRun } from './support/outbound-images.ts';

describe('telegram: images the model sends', () => {
  let peer: TelegramPeer;
  let model: FakeOpenAI;
  let run: OutboundRun;
  before(async () => {
    model = await startFakeOpenAI();
    peer = await startTelegramPeer({ flood: false });
    run = await startForPeer(peer, model, { TEST_MODEL_KEY: 'sk-telegram' });
  });
  after(async () => {
    await run?.stop();
    await peer?.close();
    await model?.close();
  });

  it('sends a PNG as a photo and a PDF as a document', async () => {
    await modelSends(peer, model, run, { 'chart.png': await chartPng(64, 48), 'report.pdf': pdf });
    assert.deepEqual(byName(peer.botUploads(dm)).map(({ name, kind, width, height }) => ({ name, kind, width, height })), [
      { name: 'chart.png', kind: 'photo', width: 64, height: 48 },
      { name: 'report.pdf', kind: 'document', width: undefined, height: undefined },
    ]);
  });

  it('sends an image over the photo limits (10 MB; sides over 20:1) as a document, and a GIF as an animation', async () => {
    const wide = await chartPng(2100, 100);
    const gif = await sharp({ create: { width: 30, height: 20, channels: 3, background: { r: 0, g: 0, b: 255 } } }).gif().toBuffer();
    await modelSends(peer, model, run, { 'scan.png': await heavyPng(), 'banner.png': wide, 'spinner.gif': gif });
    assert.deepEqual(byName(peer.botUploads(dm).slice(-3)).map(({ name, kind }) => ({ name, kind })), [
      { name: 'banner.png', kind: 'document' },
      { name: 'scan.png', kind: 'document' },
      { name: 'spinner.gif', kind: 'animation' },
    ]);
  });
});
