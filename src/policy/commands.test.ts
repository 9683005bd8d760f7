import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCommand, runCommand, type CommandDeps } from './commands.ts';
import { turnText } from './turn-text.ts';
import type { Sql } from '../store/sql.ts';

describe('chat commands', () => {
  it('parses /cmd and !cmd with an argument, and nothing else', () => {
    assert.deepEqual(parseCommand('/model gpt-4o'), { name: 'model', argument: 'gpt-4o' });
    assert.deepEqual(parseCommand('  !NEW  '), { name: 'new', argument: '' });
    assert.equal(parseCommand('/unknown'), undefined);
    assert.equal(parseCommand('please /new'), undefined);
    assert.equal(parseCommand('/newer'), undefined);
  });

  it('switches models only among the configured ones; the default is stored as none', async () => {
    const chosen: Array<string | undefined> = [];
    const tx = {} as Sql;
    const deps: CommandDeps = { models: ['a', 'b'], model: async () => undefined, setModel: async (_tx, _c, m) => void chosen.push(m), clearHistory: async () => undefined, status: () => 'ok' };
    assert.match((await runCommand({ name: 'model', argument: '' }, 'k', deps)).reply, /Model: a\. Also available: b/);
    assert.match((await runCommand({ name: 'model', argument: 'zzz' }, 'k', deps)).reply, /configured models are a, b/);
    await (await runCommand({ name: 'model', argument: 'b' }, 'k', deps)).commit!(tx);
    await (await runCommand({ name: 'model', argument: 'a' }, 'k', deps)).commit!(tx);
    assert.deepEqual(chosen, ['b', undefined]);
  });
});

describe('turnText', () => {
  const base = { channel: 'c', account: 'a', chat: 'x', id: '1', timestamp: 0, sender: { id: 'u1', name: 'Ann' }, text: 'hello' };
  it('is the bare text in a DM, named in a group, with attachments described', () => {
    assert.equal(turnText(base), 'hello');
    assert.equal(turnText({ ...base, direct: false }), 'Ann: hello');
    const withFile = turnText({ ...base, attachments: [{ kind: 'file', name: 'a.pdf', mime: 'application/pdf', size: 2048, path: 'inbox/c/1/a.pdf' }] });
    assert.match(withFile, /^hello\n\n\[The person attached a file.*\n- a\.pdf \(file, application\/pdf, 2 KB\) saved at inbox\/c\/1\/a\.pdf$/);
  });
});
