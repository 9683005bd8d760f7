/**
 * End to end through the real daemon: the scripted model calls tools in sequence, asks for
 * approval in the conversation, and schedules a reminder that later messages it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from './fixtures/fake-openai.ts';
import { runCli, startDaemon, tempConfig } from './support/cli.ts';

const env = { TEST_MODEL_KEY: 'k' };
const toolResults = (request: RecordedRequest): string[] => request.body.messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');

describe('agent end to end', () => {
  let model: FakeOpenAI;
  before(async () => {
    model = await startFakeOpenAI();
  });
  after(() => model.close());

  it('calls two tools in sequence and answers with both results', async () => {
    const config = tempConfig(model.baseUrl, '[tools]\nenabled = ["current_time", "schedule"]\n[channels.terminal]\nuser = "ada"\n');
    try {
      model.requests.length = 0;
      model.script(
        { toolCalls: [{ name: 'current_time', arguments: { timezone: 'UTC' } }] },
        { toolCalls: [{ name: 'schedule', arguments: { action: 'create', message: 'Stretch!', in_minutes: 60 } }] },
      );
      model.fallback = (request) => ({ text: `Time: ${toolResults(request)[0]} | ${toolResults(request)[1]}` });
      const result = await runCli(['chat', '--config', config.file], { input: 'what time is it, and remind me to stretch in an hour\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /^Time: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(UTC\) \| Scheduled task #1; next run \d{4}-.*\n$/);
      assert.equal(model.requests.length, 3);
      assert.deepEqual(
        model.requests[2]!.body.messages.slice(1).map((m) => m.role),
        ['user', 'assistant', 'tool', 'assistant', 'tool'],
      );
    } finally {
      config.cleanup();
    }
  });

  it('asks for approval in the conversation, and resumes the turn on "yes"', async () => {
    const config = tempConfig(model.baseUrl, '[tools]\nenabled = ["shell"]\n[channels.terminal]\nuser = "ada"\n');
    try {
      model.requests.length = 0;
      model.script({ toolCalls: [{ name: 'shell', arguments: { command: 'mkdir reports' } }] });
      model.fallback = (request) => ({ text: `Done (${toolResults(request).join(' / ') || 'no tool result'}).` });
      const result = await runCli(['chat', '--config', config.file], { input: 'make a reports folder\nyes\n', env });
      assert.equal(result.code, 0, result.stderr);
      const [question, answer] = result.stdout.split(/\n(?=Done)/);
      assert.match(question!, /^I need your approval before I run this:\n• shell: mkdir reports\nReply yes, no, or always/);
      assert.match(answer!, /^Done \(.*exit code 0.*\)\.\n$/s);
      const { existsSync } = await import('node:fs');
      const { join } = await import('node:path');
      assert.ok(existsSync(join(config.dir, 'data', 'workspace', 'reports')), 'the approved command ran in the workspace');
      assert.equal(model.requests.length, 2, '"yes" was not sent to the model as a message');
    } finally {
      config.cleanup();
    }
  });

  it('keeps the question across a restart: the answer after it resumes the turn', async () => {
    const config = tempConfig(model.baseUrl, '[tools]\nenabled = ["shell"]\n[channels.terminal]\nuser = "ada"\n');
    try {
      model.requests.length = 0;
      model.script({ toolCalls: [{ name: 'shell', arguments: { command: 'mkdir archive' } }] });
      model.fallback = (request) => ({ text: `Done (${toolResults(request).length} result).` });
      const first = startDaemon(['start', '--config', config.file], { env });
      await first.waitFor(/"msg":"ready"/);
      first.child.stdin.write('make an archive folder\n');
      await first.waitFor(/• shell: mkdir archive/, 'stdout');
      first.child.kill('SIGTERM');
      assert.equal((await first.exited).code, 0);

      const second = startDaemon(['start', '--config', config.file], { env });
      await second.waitFor(/"msg":"ready"/);
      second.child.stdin.write('always\n');
      await second.waitFor(/Done \(1 result\)\.\n/, 'stdout');
      second.child.kill('SIGTERM');
      await second.exited;
      const { existsSync } = await import('node:fs');
      const { join } = await import('node:path');
      assert.ok(existsSync(join(config.dir, 'data', 'workspace', 'archive')));
    } finally {
      config.cleanup();
    }
  });

  it('refuses a high-risk command in supervised mode without asking, and tells the model why', async () => {
    const config = tempConfig(model.baseUrl, '[tools]\nenabled = ["shell"]\n[channels.terminal]\nuser = "ada"\n');
    try {
      model.requests.length = 0;
      model.script({ toolCalls: [{ name: 'shell', arguments: { command: 'rm -r notes' } }] });
      model.fallback = (request) => ({ text: `Result: ${toolResults(request)[0]}` });
      const result = await runCli(['chat', '--config', config.file], { input: 'delete my notes\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /^Result: Error: .*high risk.*autonomy = "full"/);
    } finally {
      config.cleanup();
    }
  });

  it('fires a scheduled reminder into the same conversation later', async () => {
    const config = tempConfig(model.baseUrl, '[tools]\nenabled = ["schedule"]\n[channels.terminal]\nuser = "ada"\n');
    try {
      model.requests.length = 0;
      model.script({ toolCalls: [{ name: 'schedule', arguments: { action: 'create', message: 'Tell Ada to drink water', in_minutes: 0.02 } }] }, { text: 'Reminder set.' });
      model.fallback = (request) => ({ text: `Reminder: ${[...request.body.messages].reverse().find((m) => m.role === 'user')?.content}` });
      const daemon = startDaemon(['start', '--config', config.file], { env });
      await daemon.waitFor(/"msg":"ready"/);
      daemon.child.stdin.write('remind me to drink water in a moment\n');
      await daemon.waitFor(/Reminder set\.\n/, 'stdout');
      await daemon.waitFor(/Reminder: \[Scheduled task #1\] Tell Ada to drink water\n/, 'stdout');
      await new Promise((resolve) => setTimeout(resolve, 1500));
      daemon.child.kill('SIGTERM');
      assert.equal((await daemon.exited).code, 0);
      assert.equal(daemon.stdout().split('Reminder: [Scheduled').length - 1, 1, 'fired once');
      const reminderRequest = model.requests.at(-1)!;
      assert.deepEqual(
        reminderRequest.body.messages.slice(1).map((m) => m.role),
        ['user', 'assistant', 'tool', 'assistant', 'user'],
        'the reminder turn carries the conversation history',
      );
    } finally {
      config.cleanup();
    }
  });
});
