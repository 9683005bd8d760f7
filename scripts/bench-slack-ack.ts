/**
 * Slack ack latency: prints figures, never fails on speed.
 *
 *   node scripts/bench-slack-ack.ts                     (Socket Mode)
 *   node scripts/bench-slack-ack.ts http                (HTTP Events API)
 *   node scripts/bench-slack-ack.ts socket 2            (the 200 events over 2 chats, not 20)
 *   SLACK_CHANNEL_MODULE=/other/channels/slack/index.ts node scripts/bench-slack-ack.ts
 *                                                       (another tree's channel: before/after)
 *
 * The Slack channel in this process against the Slack peer (test/peers/slack.ts) with Slack's
 * own deadline and retries (3 s; at once, 1 min, 5 min). 200 message events from 200
 * different people (so every one needs a users.info, which the peer answers after 500 ms)
 * over 20 DMs (or as many as the second argument says), sent 20 ms apart; a push that takes them at once (the runtime's inbox is not
 * what is measured) and the channel's state in a SQLite file (where the journal is). Prints
 * the time from each event's first delivery to its ack (p50 / p99 / max), the retries Slack
 * sent, and the events not acknowledged 20 s after the last one (Slack would give up on
 * those after its third retry).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import type { Channel, ChannelContext, InboundMessage } from '../src/channel.ts';
import type { SlackConfig } from '../channels/slack/config.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { channelState } from '../src/store/channel-state.ts';
import { openDatabase } from '../src/store/db.ts';
import { sqliteDatabase } from '../src/store/sqlite-sql.ts';
import { startSlackPeer } from '../test/peers/slack.ts';

const EVENTS = 200;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

type Factory = (config: SlackConfig, ctx: ChannelContext) => Channel;

async function main(): Promise<void> {
  const mode = process.argv[2] === 'http' ? 'http' : 'socket';
  const chats = Number(process.argv[3] ?? 20);
  const module = process.env.SLACK_CHANNEL_MODULE ?? join(import.meta.dirname, '..', 'channels', 'slack', 'index.ts');
  const { createSlackChannel } = (await import(pathToFileURL(module).href)) as { createSlackChannel: Factory };
  const peer = await startSlackPeer({ usersInfoDelayMs: 500, rateLimits: 'off' });
  const dir = mkdtempSync(join(tmpdir(), 'sb-bench-slack-'));
  const logs: string[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void logs.push(line) });
  const state = channelState(sqliteDatabase(openDatabase(join(dir, 'state.db'))), 'slack');
  const config: SlackConfig =
    mode === 'http'
      ? { bot_token: peer.botToken, signing_secret: peer.signingSecret, api_url: peer.apiUrl, listen: '127.0.0.1:0', mention_only: true, stream: false }
      : { bot_token: peer.botToken, app_token: peer.appToken, api_url: peer.apiUrl, listen: '127.0.0.1:0', mention_only: true, stream: false };
  const channel = createSlackChannel(config, { name: 'slack', log, assistantName: 'Bench', attachments: createAttachmentStore({ workspace: dir }), state, stateDir: dir });
  const pushed = new Set<string>();
  const push = async (message: InboundMessage): Promise<'accepted' | 'duplicate'> => {
    if (pushed.has(message.id)) return 'duplicate';
    pushed.add(message.id);
    return 'accepted';
  };
  const abort = new AbortController();
  let ready = false;
  const listening = channel.listen(push, abort.signal, { ready: () => void (ready = true), alive: () => undefined, deaf: () => undefined });
  while (!ready) await sleep(10);
  if (mode === 'http') peer.useHttp(/"url":"([^"]+)"/.exec(logs.find((line) => line.includes('slack events listener')) ?? '')![1]);

  const started = performance.now();
  for (let i = 0; i < EVENTS; i++) {
    const ts = `${1_800_000_000 + i}.000100`;
    void peer.emit({ type: 'message', subtype: undefined, channel: `D0BENCH${i % chats}`, channel_type: 'im', user: `U0PERSON${i}`, text: `message ${i}`, ts, event_ts: ts });
    await sleep(20);
  }
  const deadline = performance.now() + 20_000;
  while (performance.now() < deadline && (peer.envelopes().some((e) => !e.acked) || pushed.size < EVENTS)) await sleep(50);
  const sorted = [...peer.stats.ackLatencies].sort((a, b) => a - b);
  const unacked = peer.envelopes().filter((e) => !e.acked).length;
  process.stdout.write(
    `slack ${mode} ack, ${EVENTS} events in ${chats} chats (users.info 500 ms), ${module}\n` +
      `  ack latency p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(1)} ms\n` +
      `  retries sent by Slack ${peer.stats.redeliveries}, not acknowledged after the run ${unacked}, pushed ${pushed.size}, ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
  );
  abort.abort();
  await listening;
  await peer.close();
  rmSync(dir, { recursive: true, force: true });
}

await main();
