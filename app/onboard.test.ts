import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { parseConfig } from '../src/config/load.ts';
import { runOnboard } from './onboard.ts';

async function onboard(answers: readonly string[], target: string) {
  const stdin = new PassThrough();
  stdin.end(answers.map((line) => `${line}\n`).join(''));
  let out = '';
  const stdout = new Writable({ write: (chunk: Buffer, _encoding, done) => ((out += chunk.toString('utf8')), done()) });
  const code = await runOnboard([], { stdin, stdout, stderr: stdout, env: {}, configFlag: target, timeoutMs: 3000 });
  return { code, out };
}

test('onboard checks the key with one real call and writes a commented config, keeping the old one', async (t) => {
  const model = await startFakeOpenAI();
  const dir = mkdtempSync(join(tmpdir(), 'onboard-'));
  t.after(async () => {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const target = join(dir, 'switchboard.toml');
  writeFileSync(target, '# mine\n');
  const { code, out } = await onboard(['openai', model.baseUrl, 'scripted', 'MY_KEY', 'sk-onboard', 'telegram'], target);
  assert.equal(code, 0, out);
  assert.equal(model.requests.at(-1)?.headers.authorization, 'Bearer sk-onboard');
  assert.match(out, /✓ openai scripted/);
  assert.equal(readFileSync(`${target}.bak`, 'utf8'), '# mine\n');
  const text = readFileSync(target, 'utf8');
  assert.doesNotMatch(text, /sk-onboard/, 'the key is never written');
  assert.match(text, /^api_key = "\$\{MY_KEY\}"$/m);
  assert.match(text, /^# /m);
  assert.equal(statSync(target).mode & 0o777, 0o600);
  const config = parseConfig(text, target, { MY_KEY: 'k', TELEGRAM_BOT_TOKEN: 't' });
  assert.equal(config.provider.model, 'scripted');
  assert.ok(config.channels.telegram);
  assert.match(out, /export TELEGRAM_BOT_TOKEN=/);
});

test('a key the endpoint refuses: nothing written unless confirmed', async (t) => {
  const model = await startFakeOpenAI();
  const dir = mkdtempSync(join(tmpdir(), 'onboard-'));
  t.after(async () => {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  });
  model.script({ status: 401, body: JSON.stringify({ error: { message: 'Incorrect API key' } }) });
  const target = join(dir, 'switchboard.toml');
  const { code, out } = await onboard(['openai', model.baseUrl, 'scripted', 'MY_KEY', 'sk-bad', 'terminal', 'no'], target);
  assert.equal(code, 1, out);
  assert.match(out, /✗ .*401/);
  assert.throws(() => statSync(target));
});
