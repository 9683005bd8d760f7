/**
 * Memory end to end through the real daemon: remembered per person, recalled into that
 * person's turns only (never another's), surviving a lost database through the snapshot,
 * and usable from the operator CLI while the daemon runs.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startFakeEmbeddings, type FakeEmbeddings } from './fixtures/fake-embeddings.ts';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from './fixtures/fake-openai.ts';
import { runCli, startDaemon, tempConfig } from './support/cli.ts';

const env = { TEST_MODEL_KEY: 'k' };
const systemOf = (request: RecordedRequest): string => request.body.messages[0]!.content ?? '';
const toolResults = (request: RecordedRequest): string[] => request.body.messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');

function configFor(model: FakeOpenAI, user: string, extra = ''): (dir?: string) => ReturnType<typeof tempConfig> {
  return (dir) => {
    const config = tempConfig(model.baseUrl);
    const target = dir ?? config.dir;
    const file = join(target, `${user}.toml`);
    writeFileSync(
      file,
      `data_dir = "./data"\n[provider]\nkind = "openai"\nbase_url = "${model.baseUrl}"\nmodel = "m"\napi_key = "\${TEST_MODEL_KEY}"\n` +
        `[tools]\nenabled = ["memory_store", "memory_recall", "memory_forget"]\n${extra}[channels.terminal]\nuser = "${user}"\n`,
    );
    if (dir) config.cleanup();
    return { dir: target, file, cleanup: () => rmSync(target, { recursive: true, force: true }) };
  };
}

for (const mode of ['keyword-only', 'hybrid'] as const) {
  describe(`memory through the daemon (${mode})`, () => {
    let model: FakeOpenAI;
    let embeddings: FakeEmbeddings | undefined;
    let extra = '';
    before(async () => {
      model = await startFakeOpenAI();
      if (mode === 'hybrid') {
        embeddings = await startFakeEmbeddings();
        extra = `[memory.embeddings]\nkind = "openai"\nbase_url = "${embeddings.baseUrl}"\nmodel = "fake-embed"\n`;
      }
    });
    after(async () => {
      await model.close();
      await embeddings?.close();
    });

    it("recalls a person's memories into their own turns and never into another person's", async () => {
      const ada = configFor(model, 'ada', extra)();
      const bob = configFor(model, 'bob', extra)(ada.dir);
      try {
        model.requests.length = 0;
        model.script({ toolCalls: [{ name: 'memory_store', arguments: { content: "Ada's dog is called Rex", key: 'dog_name' } }] }, { text: 'Noted!' });
        const stored = await runCli(['chat', '--config', ada.file], { input: 'remember that my dog is called Rex\n', env });
        assert.equal(stored.stdout, 'Noted!\n', stored.stderr);
        await new Promise((resolve) => setTimeout(resolve, mode === 'hybrid' ? 800 : 0)); // background embedding

        // Bob asks about "my dog": nothing of Ada's may reach his turn, automatically or through the tool.
        model.requests.length = 0;
        model.script({ toolCalls: [{ name: 'memory_recall', arguments: { query: 'what is the dog called' } }] });
        model.fallback = () => ({ text: 'ok' });
        const bobRun = await runCli(['chat', '--config', bob.file], { input: "what is my dog's name?\n", env });
        assert.equal(bobRun.code, 0, bobRun.stderr);
        for (const request of model.requests) assert.doesNotMatch(JSON.stringify(request.body.messages), /Rex/, "Ada's memory leaked into Bob's conversation");
        assert.equal(toolResults(model.requests[1]!)[0], 'Nothing relevant remembered.');

        // Ada asks in a new session: recalled automatically, and through the tool.
        model.requests.length = 0;
        model.script({ toolCalls: [{ name: 'memory_recall', arguments: { query: 'dog' } }] });
        const adaRun = await runCli(['chat', '--config', ada.file], { input: "what is my dog's name?\n", env });
        assert.equal(adaRun.code, 0, adaRun.stderr);
        assert.match(systemOf(model.requests[0]!), /Things you remember[\s\S]*Ada's dog is called Rex/);
        assert.match(toolResults(model.requests[1]!).at(-1)!, /\[person\] dog_name: Ada's dog is called Rex/);
        if (embeddings) assert.ok(embeddings.requestCount > 0, 'hybrid recall used the embedding service');
      } finally {
        ada.cleanup();
        model.fallback = (request) => ({ text: `echo: ${[...request.body.messages].reverse().find((m) => m.role === 'user')?.content}` });
      }
    });
  });
}

describe('memory: outages, snapshot and the operator CLI', () => {
  let model: FakeOpenAI;
  let embeddings: FakeEmbeddings;
  before(async () => {
    model = await startFakeOpenAI();
    embeddings = await startFakeEmbeddings();
  });
  after(async () => {
    await model.close();
    await embeddings.close();
  });

  it('answers keyword-only while the embedding service is down', async () => {
    const config = configFor(model, 'ada', `[memory.embeddings]\nkind = "openai"\nbase_url = "${embeddings.baseUrl}"\nmodel = "fake-embed"\n`)();
    try {
      await embeddings.down('refuse');
      model.script({ toolCalls: [{ name: 'memory_store', arguments: { content: 'Ada is allergic to peanuts', key: 'allergy' } }] }, { text: 'Stored.' });
      const first = await runCli(['chat', '--config', config.file], { input: 'remember my peanut allergy\n', env });
      assert.equal(first.stdout, 'Stored.\n', first.stderr);
      model.requests.length = 0;
      const second = await runCli(['chat', '--config', config.file], { input: 'am I allergic to peanuts?\n', env });
      assert.equal(second.code, 0, second.stderr);
      assert.equal(second.stdout, 'echo: am I allergic to peanuts?\n');
      assert.match(systemOf(model.requests[0]!), /Ada is allergic to peanuts/);
    } finally {
      await embeddings.up();
      config.cleanup();
    }
  });

  let stopLater = (): void => undefined;
  it('restores core memories from MEMORY_SNAPSHOT.md when the database is lost, and the CLI works beside the daemon', async () => {
    const config = configFor(model, 'ada', '[memory]\nhygiene_hours = 0.0003\n')();
    try {
      model.script({ toolCalls: [{ name: 'memory_store', arguments: { content: 'Ada prefers tea over coffee', key: 'drink' } }] }, { text: 'Got it.' });
      const daemon = startDaemon(['start', '--config', config.file], { env });
      stopLater = () => daemon.child.kill('SIGKILL');
      await daemon.waitFor(/"msg":"ready"/);
      daemon.child.stdin.write('I prefer tea\n');
      await daemon.waitFor(/Got it\.\n/, 'stdout');
      // operator CLI while the daemon runs
      const listed = await runCli(['memory', 'list', '--config', config.file]);
      assert.equal(listed.code, 0, listed.stderr + listed.stdout);
      assert.match(listed.stdout, /person:terminal:ada.*drink/);
      const searched = await runCli(['memory', 'search', 'tea', '--person', 'terminal:ada', '--config', config.file]);
      assert.match(searched.stdout, /Ada prefers tea over coffee/);
      await new Promise((resolve) => setTimeout(resolve, 2000)); // a hygiene pass writes the snapshot
      daemon.child.kill('SIGTERM');
      assert.equal((await daemon.exited).code, 0);
      const snapshot = readFileSync(join(config.dir, 'data', 'MEMORY_SNAPSHOT.md'), 'utf8');
      assert.match(snapshot, /## person terminal:ada[\s\S]*\*\*drink\*\*: Ada prefers tea over coffee/);

      for (const file of ['switchboard.db', 'switchboard.db-wal', 'switchboard.db-shm']) rmSync(join(config.dir, 'data', file), { force: true });
      model.requests.length = 0;
      const fresh = await runCli(['chat', '--config', config.file], { input: 'tea or coffee for me?\n', env });
      assert.equal(fresh.code, 0, fresh.stderr);
      assert.match(systemOf(model.requests[0]!), /Ada prefers tea over coffee/);

      const forgot = await runCli(['memory', 'forget', 'drink', '--config', config.file]);
      assert.equal(forgot.code, 0, forgot.stderr);
      const after = await runCli(['memory', 'list', '--config', config.file, '--category', 'core']);
      assert.doesNotMatch(after.stdout, /drink/);
    } finally {
      stopLater();
      config.cleanup();
    }
  });
});
