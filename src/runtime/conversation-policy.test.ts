/**
 * The shared conversation policy inside the runtime: access and pairing, mention gating with
 * context, chat commands, split replies that resume after a failed part, typing, streamed
 * drafts finalised by the outbox, and files sent after the reply.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { TurnHandler, TurnInput } from '../agent/agent.ts';
import { SendError } from '../channel.ts';
import { PairingStore } from '../policy/access.ts';
import { openDatabase, type Db } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { ConversationSettings } from '../store/settings.ts';
import { testLogger } from '../../test/support/log.ts';
import { createRichChannel } from '../../test/support/rich-channel.ts';
import { defaultSupervisorOptions } from './supervisor.ts';
import { Runtime, type ChannelPolicy } from './runtime.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-policy-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let count = 0;

type Event = { kind: 'send'; text: string; replyTo?: string } | { kind: 'edit'; id: string; text: string } | { kind: 'draft'; text: string } | { kind: 'typing' } | { kind: 'file'; name: string };

/** A channel with every capability, recording what it was asked to do. */
function richChannel(options: { failSendAt?: number[]; limit?: number } = {}) {
  const events: Event[] = [];
  let sends = 0;
  const { channel, inject } = createRichChannel({
    ...(options.limit === undefined ? {} : { limit: options.limit }),
    call(call) {
      if (call.kind === 'send') {
        sends++;
        if (options.failSendAt?.includes(sends)) throw new SendError('flaky network');
        events.push({ kind: 'send', text: call.message.text, ...(call.message.replyTo ? { replyTo: call.message.replyTo } : {}) });
      } else if (call.kind === 'typing') events.push({ kind: 'typing' });
      else if (call.kind === 'draft') events.push({ kind: 'draft', text: call.message.text });
      else if (call.kind === 'edit') events.push({ kind: 'edit', id: call.id, text: call.text });
      else events.push({ kind: 'file', name: call.file.name });
    },
  });
  return { channel, events, inject, sends: () => events.filter((e) => e.kind === 'send').map((e) => (e as { text: string }).text) };
}

async function setup(agent: TurnHandler, policy: ChannelPolicy | undefined, channelOptions: { failSendAt?: number[]; limit?: number } = {}, path = join(dir, `p${++count}.db`)) {
  const db: Db = openDatabase(path);
  const database = sqliteDatabase(db);
  const rich = richChannel(channelOptions);
  const settings = new ConversationSettings(database);
  const pairing = new PairingStore(database);
  const runtime = new Runtime({
    database,
    log: testLogger(),
    channels: [rich.channel],
    agent,
    historyTurns: 50,
    maxInFlight: 4,
    maxQueued: 100,
    turnTimeoutMs: 10_000,
    shutdownGraceMs: 1000,
    supervisor: defaultSupervisorOptions,
    delivery: { attemptsPerRound: 3, initialBackoffMs: 5, maxBackoffMs: 20 },
    policies: new Map(policy ? [['chat', policy]] : []),
    pairing,
    commands: { models: ['main-model', 'other-model'], model: (c) => settings.model(c), setModel: (tx, c, m) => settings.in(tx).setModel(c, m) },
  });
  await runtime.start();
  return { runtime, pairing, db, path, ...rich };
}

const recording = (inputs: TurnInput[], reply = (input: TurnInput) => `re: ${input.message.text}`): TurnHandler => async (input) => {
  inputs.push(input);
  return { reply: reply(input), messages: [{ role: 'user', content: input.prompt ?? input.message.text }, { role: 'assistant', content: reply(input) }] };
};

describe('conversation policy in the runtime', () => {
  it('pairs an unknown sender once, and answers them after approval', async () => {
    const inputs: TurnInput[] = [];
    const { runtime, pairing, inject, sends } = await setup(recording(inputs), { mentionOnly: true, stream: false });
    await runtime.ready;
    await inject({ id: '1', text: 'hi' });
    await inject({ id: '2', text: 'hello?' });
    await runtime.idle();
    assert.equal(sends().length, 1);
    const code = /code is (\w{6})/.exec(sends()[0]!)![1]!;
    assert.equal(inputs.length, 0);
    assert.equal(await pairing.approve('chat', code), 'alice');
    await inject({ id: '3', text: 'now' });
    await runtime.idle();
    assert.deepEqual(sends().slice(1), ['re: now']);
    assert.equal(runtime.health().counters.ignored, 1);
    await runtime.stop();
  });

  it('keeps unaddressed group messages as context for the next addressed turn, once', async () => {
    const inputs: TurnInput[] = [];
    const { runtime, inject, sends } = await setup(recording(inputs), { allow: ['*'], mentionOnly: true, stream: false });
    await runtime.ready;
    await inject({ id: '1', text: 'lunch at noon?', direct: false, sender: { id: 'bob', name: 'Bob' } });
    await inject({ id: '2', text: 'what did Bob say?', direct: false, addressed: true });
    await runtime.idle();
    await inject({ id: '3', text: 'and now?', direct: false, addressed: true });
    await runtime.idle();
    assert.equal(inputs.length, 2);
    assert.match(inputs[0]!.prompt!, /Bob: lunch at noon\?[\s\S]*Alice: what did Bob say\?/);
    assert.equal(inputs[1]!.prompt, 'Alice: and now?', 'context is given once');
    assert.equal(sends().length, 2);
    await runtime.stop();
  });

  it('answers /help, /status, /model and /new without the model; /model switches, /new forgets', async () => {
    const inputs: TurnInput[] = [];
    const { runtime, inject, sends } = await setup(recording(inputs), { allow: ['alice'], mentionOnly: true, stream: false });
    await runtime.ready;
    for (const [id, text] of [['1', 'first'], ['2', '/help'], ['3', '/status'], ['4', '/model'], ['5', '/model nope'], ['6', '!model other-model'], ['7', 'second'], ['8', '/new'], ['9', 'third']]) {
      await inject({ id: id!, text: text! });
      await runtime.idle();
    }
    const out = sends();
    assert.match(out[1]!, /\/new/);
    assert.match(out[2]!, /Up .* running/);
    assert.match(out[3]!, /Model: main-model.*other-model/);
    assert.match(out[4]!, /can't switch/);
    assert.match(out[5]!, /Switched .* other-model/);
    assert.equal(inputs.length, 3);
    assert.equal(inputs[1]!.model, 'other-model');
    assert.equal(inputs[1]!.history.length, 2);
    assert.deepEqual(inputs[2]!.history, [], '/new cleared the history');
    await runtime.stop();
  });

  it('answers chat commands on a channel the policy exempts (the terminal), and lets everything else through', async () => {
    const inputs: TurnInput[] = [];
    const { runtime, inject, sends } = await setup(recording(inputs), undefined);
    await runtime.ready;
    for (const [id, text] of [['1', 'hello'], ['2', '/help'], ['3', '!status'], ['4', '/model other-model'], ['5', 'again'], ['6', '/new'], ['7', '/nonsense']]) {
      await inject({ id: id!, text: text!, sender: { id: 'stranger' } });
      await runtime.idle();
    }
    const out = sends();
    assert.equal(out[0], 're: hello', 'no pairing, no allow list: the exempt channel answers anyone');
    assert.match(out[1]!, /^Commands:/);
    assert.match(out[2]!, /Up .* running/);
    assert.match(out[3]!, /Switched .* other-model/);
    assert.match(out[5]!, /fresh conversation/);
    assert.equal(out[6], 're: /nonsense', 'an unknown command goes to the model');
    assert.deepEqual(
      inputs.map((input) => [input.message.text, input.model]),
      [
        ['hello', undefined],
        ['again', 'other-model'],
        ['/nonsense', 'other-model'],
      ],
    );
    assert.deepEqual(inputs[2]!.history, [], '/new cleared the history');
    await runtime.stop();
  });

  it('splits a long reply, resumes after a failed part without repeating one, then sends files', async () => {
    const long = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    const agent: TurnHandler = async () => ({ reply: long, messages: [], files: [{ path: '/tmp/x.txt', name: 'x.txt' }] });
    const first = await setup(agent, { allow: ['*'], mentionOnly: true, stream: false }, { failSendAt: [2, 3, 4], limit: 100 });
    await first.runtime.ready;
    await first.inject({ id: '1', text: 'go' });
    await first.runtime.idle();
    assert.equal(first.sends().length, 1, 'part 2 failed three times: it waits for the next round');
    assert.equal(first.events[0]!.kind, 'typing');
    await first.runtime.stop();
    first.db.close();
    const second = await setup(agent, { allow: ['*'], mentionOnly: true, stream: false }, { limit: 100 }, first.path);
    await second.runtime.ready;
    await new Promise((resolve) => setTimeout(resolve, 50));
    await second.runtime.idle();
    const parts = [...first.sends(), ...second.sends()];
    assert.ok(parts.length >= 4 && parts.every((p) => p.length <= 100));
    assert.equal(parts.join(' '), long, 'every part once, in order');
    assert.deepEqual(second.events.filter((e) => e.kind === 'file'), [{ kind: 'file', name: 'x.txt' }]);
    await second.runtime.stop();
  });

  it('streams into one draft and finalises it with the reply', async () => {
    const agent: TurnHandler = async (input) => {
      for (const piece of ['Hel', 'lo <tool', '_call>{}</tool_call> wor', 'ld']) {
        input.onTextDelta?.(piece);
        await new Promise((resolve) => setTimeout(resolve, 30));
      }
      return { reply: 'Hello world', messages: [] };
    };
    const { runtime, inject, events } = await setup(agent, { allow: ['*'], mentionOnly: true, stream: true });
    await runtime.ready;
    await inject({ id: '1', text: 'stream' });
    await runtime.idle();
    const drafts = events.filter((e) => e.kind === 'draft');
    const edits = events.filter((e) => e.kind === 'edit') as Array<{ text: string }>;
    assert.equal(drafts.length, 1);
    assert.equal(events.filter((e) => e.kind === 'send').length, 0, 'no second message');
    assert.equal(edits.at(-1)!.text, 'Hello world');
    for (const e of [...drafts, ...edits] as Array<{ text: string }>) assert.doesNotMatch(e.text, /tool_call|</);
    await runtime.stop();
  });
});

describe('status notes', () => {
  it('/status shows what a channel says an operator must know', async () => {
    const inputs: TurnInput[] = [];
    const { runtime, inject, sends, channel } = await setup(recording(inputs), { allow: ['*'], mentionOnly: true, stream: false });
    (channel as Record<string, unknown>).statusNotes = () => ['1 encrypted room not supported (!r:x)'];
    await runtime.ready;
    await inject({ id: '1', text: '/status' });
    await runtime.idle();
    assert.match(sends()[0]!, /chat running \(1 encrypted room not supported \(!r:x\)\)/);
    assert.deepEqual(runtime.health().channels[0]!.notes, ['1 encrypted room not supported (!r:x)']);
    await runtime.stop();
  });
});
