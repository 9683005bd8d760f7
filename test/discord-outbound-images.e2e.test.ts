/**
 * Discord, outbound images: a PNG the model sends with send_file is an attachment with
 * content_type image/png, its size, and a file name with an image extension (shown inline); a
 * PDF stays a file. The peer (test/peers/discord.ts, botRecords().attachments) records them as
 * Discord stores them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startDiscordPeer, type DiscordPeer } from './peers/discord.ts';
import { byName, chartPng, dm, modelSends, pdf, startForPeer, type OutboundRun } from './support/outbound-images.ts';

describe('discord: images the model sends', () => {
  let peer: DiscordPeer;
  let model: FakeOpenAI;
  let run: OutboundRun;
  before(async () => {
    model = await startFakeOpenAI();
    peer = await startDiscordPeer();
    run = await startForPeer(peer, model, { TEST_MODEL_KEY: 'sk-discord' });
  });
  after(async () => {
    await run?.stop();
    await peer?.close();
    await model?.close();
  });

  const attachments = () => peer.botRecords(dm).flatMap((record) => record.attachments);

  it('sends a PNG as an inline image attachment and a PDF as a file', async () => {
    await modelSends(peer, model, run, { 'chart.png': await chartPng(64, 48), 'report.pdf': pdf });
    assert.deepEqual(byName(attachments(), (a) => a.filename), [
      { filename: 'chart.png', contentType: 'image/png', width: 64, height: 48, inline: true },
      { filename: 'report.pdf', contentType: 'application/pdf', inline: false },
    ]);
  });

  it('gives an image whose name lacks its extension the right one, so it still shows inline', async () => {
    await modelSends(peer, model, run, { plot: await chartPng(30, 20) });
    assert.deepEqual(attachments().at(-1), { filename: 'plot.png', contentType: 'image/png', width: 30, height: 20, inline: true });
  });
});
