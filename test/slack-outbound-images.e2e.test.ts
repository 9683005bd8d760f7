/**
 * Slack, outbound images: a PNG the model sends with send_file is shared as a png file
 * (mimetype image/png, original_w / original_h: shown inline); a PDF stays a pdf file card. The
 * peer (test/peers/slack.ts, botUploadsIn) types files the way Slack's file object does.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startSlackPeer, type SlackPeer } from './peers/slack.ts';
import { byName, chartPng, dm, modelSends, pdf, startForPeer, type OutboundRun } from './support/outbound-images.ts';

describe('slack: images the model sends', () => {
  let peer: SlackPeer;
  let model: FakeOpenAI;
  let run: OutboundRun;
  before(async () => {
    model = await startFakeOpenAI();
    peer = await startSlackPeer();
    run = await startForPeer(peer, model, { TEST_MODEL_KEY: 'sk-slack' });
  });
  after(async () => {
    await run?.stop();
    await peer?.close();
    await model?.close();
  });

  it('shares a PNG as an image shown inline and a PDF as a file', async () => {
    await modelSends(peer, model, run, { 'chart.png': await chartPng(64, 48), 'report.pdf': pdf });
    assert.deepEqual(byName(peer.botUploadsIn(dm)), [
      { name: 'chart.png', filetype: 'png', mimetype: 'image/png', width: 64, height: 48, inline: true },
      { name: 'report.pdf', filetype: 'pdf', mimetype: 'application/pdf', inline: false },
    ]);
  });

  it('gives an image whose name lacks its extension the right one, so it still shows inline', async () => {
    await modelSends(peer, model, run, { plot: await chartPng(30, 20) });
    assert.deepEqual(peer.botUploadsIn(dm).at(-1), { name: 'plot.png', filetype: 'png', mimetype: 'image/png', width: 30, height: 20, inline: true });
  });
});
