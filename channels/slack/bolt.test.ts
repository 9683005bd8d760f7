import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startSlackPeer, type SlackPeer } from '../../test/peers/slack.ts';
import { testLogger } from '../../test/support/log.ts';
import { createSlackApp, type SlackApp } from './bolt.ts';

describe("Bolt's App as the Slack channel's event intake", () => {
  let peer: SlackPeer;
  let app: SlackApp;

  before(async () => {
    peer = await startSlackPeer();
    app = await createSlackApp({ botToken: peer.botToken, apiUrl: peer.apiUrl, log: testLogger() });
  });
  after(async () => peer?.close());

  const body = (text: string) => ({
    type: 'event_callback',
    team_id: 'T1',
    event_id: `Ev${text}`,
    event: { type: 'message', channel: 'D1', user: 'U1', text, ts: '1.000001', channel_type: 'im' },
  });
  const authTests = (): number => peer.calls.filter((call) => call.method === 'auth.test').length;

  it('asks auth.test once and hands each event to its taker, resolving only after the taker did', async () => {
    assert.equal(app.auth.user_id !== undefined, true);
    const before = authTests();
    const taken: unknown[] = [];
    let finished = false;
    const dispatched = app.dispatch(body('hello'), async (event) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      taken.push(event);
      finished = true;
    });
    await dispatched;
    assert.equal(finished, true, 'dispatch resolved only after the taker finished');
    await app.dispatch(body('again'), async (event) => void taken.push(event), { num: 1, reason: 'timeout' });
    assert.deepEqual(taken.map((event) => (event as { text: string }).text), ['hello', 'again']);
    assert.equal(authTests(), before, 'no auth.test per event: Bolt has the bot ids');
  });

  it('rejects when the taker rejects, so the transport does not acknowledge', async () => {
    await assert.rejects(app.dispatch(body('lost'), () => Promise.reject(new Error('shutting down'))), /shutting down/);
  });

  it('lets an envelope that is not an event callback through without a taker call', async () => {
    let called = false;
    await app.dispatch({ type: 'app_rate_limited', team_id: 'T1' }, async () => void (called = true));
    assert.equal(called, false);
  });

  it("sends through Bolt's client, which carries the bot token", async () => {
    const result = await app.client.auth.test();
    assert.equal(result.user_id, peer.botUserId);
  });
});
