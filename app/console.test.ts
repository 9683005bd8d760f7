/**
 * The console's wiring in the composition root: the Config page's file operations (the CLI's
 * messages, a .bak, masked secrets put back, reload called once), and automatic recall
 * remembered per conversation.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parseConfig } from './config.ts';
import type { Memory, MemoryEntry } from '../src/memory.ts';
import { configPort, recordRecalls } from './console.ts';

const text = `data_dir = "./data"\n[provider]\nkind = "openai"\nmodel = "m"\napi_key = "sk-literal-0123"\n[gateway]\ntoken = "\${SWITCHBOARD_TOKEN}"\n`;

describe('the Config page’s file operations', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-console-config-'));
  const file = join(dir, 'switchboard.toml');
  // The daemon validates with its own environment; here, the test process's.
  process.env.SWITCHBOARD_TOKEN = 'x'.repeat(20);
  after(() => {
    delete process.env.SWITCHBOARD_TOKEN;
    rmSync(dir, { recursive: true, force: true });
  });
  let reloads = 0;
  const port = (): ReturnType<typeof configPort> => {
    writeFileSync(file, text, { mode: 0o644 });
    return configPort({
      file,
      current: () => parseConfig(text, file, { SWITCHBOARD_TOKEN: 'x'.repeat(20) }),
      reload: async () => {
        reloads++;
        return { ok: true, restarted: [], added: [], removed: [], agentRebuilt: true, needsRestart: [] };
      },
    });
  };

  it('shows the file with the literal secret masked, and the effective config masked', async () => {
    const config = port();
    const shown = await config.read();
    assert.ok(!shown.includes('sk-literal-0123'));
    assert.match(shown, /token = "\$\{SWITCHBOARD_TOKEN\}"/);
    assert.ok(!JSON.stringify(await config.effective()).includes('sk-literal-0123'));
  });

  it('validates with the CLI’s messages and saves nothing that is invalid', async () => {
    const config = port();
    const shown = await config.read();
    const problems = await config.validate(shown.replace('[provider]', '[provider]\ntimeout_seconds = "soon"'));
    assert.ok(problems.some((line) => line.includes('provider.timeout_seconds')), problems.join('\n'));
    const before = reloads;
    const result = await config.save(shown.replace('model = "m"', 'model = 5'));
    assert.ok(result.problems.length > 0);
    assert.equal(reloads, before, 'no reload');
    assert.equal(readFileSync(file, 'utf8'), text, 'the file is untouched');
    assert.equal(existsSync(`${file}.bak`), false);
  });

  it('saves a valid copy with a .bak, the masked secret put back, then reloads', async () => {
    const config = port();
    const shown = await config.read();
    const before = reloads;
    const result = await config.save(shown.replace('model = "m"', 'model = "n"'));
    assert.deepEqual(result.problems, []);
    assert.equal(result.reload?.ok, true);
    assert.equal(reloads, before + 1);
    assert.equal(readFileSync(file, 'utf8'), text.replace('model = "m"', 'model = "n"'));
    assert.equal(readFileSync(`${file}.bak`, 'utf8'), text);
    assert.equal(statSync(`${file}.bak`).mode & 0o777, 0o600, 'the copy of a config that may hold keys is private, whatever the original’s mode');
  });

  it('refuses a masked secret it has no value for', async () => {
    const config = port();
    const problems = await config.validate(`${await config.read()}[channels.telegram]\ntoken = "••••••••"\n`);
    assert.match(problems.join('\n'), /channels\.telegram\.token: a masked secret with no saved value/);
  });
});

describe('recordRecalls', () => {
  it('remembers what recall returned, per conversation, and passes everything else through', async () => {
    const entry: MemoryEntry = { id: '1', key: 'k', content: 'the dog is Rex', category: 'core', scope: 'shared', owner: '', createdAt: 0, updatedAt: 0, score: 0.9 };
    const calls: string[] = [];
    const memory: Memory = {
      name: 'fake',
      store: async () => entry,
      recall: async (query) => (calls.push(query), [entry]),
      get: async () => undefined,
      list: async () => [entry],
      forget: async () => true,
      count: async () => 1,
      health: async () => ({ ok: true, detail: '' }),
    };
    const recorded = recordRecalls(memory);
    assert.equal(recorded.memory.name, 'fake');
    assert.deepEqual(await recorded.memory.recall('dog?', { person: 'telegram:1', conversation: 'telegram:bot:1' }), [entry]);
    assert.deepEqual(await recorded.memory.list(), [entry]);
    const [record] = recorded.recalls('telegram:bot:1');
    assert.equal(record?.query, 'dog?');
    assert.deepEqual(record?.entries.map((e) => [e.key, e.score]), [['k', 0.9]]);
    assert.deepEqual(recorded.recalls('telegram:bot:2'), []);
  });
});
