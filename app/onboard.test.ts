import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PassThrough, Writable } from 'node:stream';
import { startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { cliPath } from '../test/support/cli.ts';
import { loadConfig, parseConfig } from './config.ts';
import { validateGatewayConfig } from '../src/gateway/server.ts';
import { runOnboard } from './onboard.ts';

const checkout = fileURLToPath(new URL('..', import.meta.url));

async function onboard(answers: readonly string[], target: string, env: NodeJS.ProcessEnv = {}) {
  const stdin = new PassThrough();
  stdin.end(answers.map((line) => `${line}\n`).join(''));
  let out = '';
  const stdout = new Writable({ write: (chunk: Buffer, _encoding, done) => ((out += chunk.toString('utf8')), done()) });
  // Run from this checkout, with nothing named switchboard in PATH: as after git clone + npm install.
  const code = await runOnboard([], { stdin, stdout, stderr: stdout, env, configFlag: target, timeoutMs: 3000, cwd: checkout });
  return { code, out };
}

function tempDir(t: { after(fn: () => void | Promise<void>): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'onboard-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('onboard checks the key with one real call and writes a commented config, keeping the old one', async (t) => {
  const model = await startFakeOpenAI();
  t.after(() => model.close());
  const dir = tempDir(t);
  const target = join(dir, 'switchboard.toml');
  writeFileSync(target, '# mine\n', { mode: 0o644 });
  const { code, out } = await onboard(
    ['openai', model.baseUrl, 'scripted', 'MY_KEY', 'sk-onboard', 'telegram', '', '42, 43', /* gateway */ '', '', ''],
    target,
  );
  assert.equal(code, 0, out);
  assert.equal(model.requests.at(-1)?.headers.authorization, 'Bearer sk-onboard');
  assert.match(out, /✓ openai scripted/);
  assert.equal(readFileSync(`${target}.bak`, 'utf8'), '# mine\n');
  // The old config may hold literal keys; its copy is private whatever the original's mode was (issue 23, held).
  assert.equal(statSync(`${target}.bak`).mode & 0o777, 0o600, 'the .bak is private');
  const text = readFileSync(target, 'utf8');
  assert.doesNotMatch(text, /sk-onboard/, 'the key is never written');
  assert.match(text, /^api_key = "\$\{MY_KEY\}"$/m);
  assert.match(text, /^# /m);
  assert.equal(statSync(target).mode & 0o777, 0o600);
  const { config } = loadConfig(target, { MY_KEY: 'k', TELEGRAM_BOT_TOKEN: 't' });
  assert.equal(config.provider.model, 'scripted');
  assert.deepEqual(config.channels.telegram?.allow, ['42', '43']);
  assert.equal(config.gateway?.listen, '127.0.0.1:8787', 'the gateway is on by default: status and reload need it');
  assert.match(out, /export TELEGRAM_BOT_TOKEN=/);
  // switchboard is not in PATH in a checkout: the lines say npx switchboard (issue 25).
  assert.match(out, /\n {2}npx switchboard doctor --config \S+\n {2}npx switchboard start --config /);
});

test('every channel, with what each needs and who may talk, and the gateway: the file validates', async (t) => {
  const model = await startFakeOpenAI();
  t.after(() => model.close());
  const dir = tempDir(t);
  const target = join(dir, 'switchboard.toml');
  const answers = [
    'openai', model.baseUrl, 'scripted', 'OPENAI_API_KEY', 'sk-all',
    'terminal, telegram, discord, slack, matrix, irc, email, webhook',
    // telegram: token variable, allow
    '', '*',
    // discord
    'DISCORD_TOKEN_2', '80351110224678912',
    // slack: bot token, mode, signing secret, listen, allow
    '', 'http', '', '127.0.0.1:3001', 'U012AB3CD',
    // matrix: a wrong homeserver first (asked again), user id, login, its variable, rooms, allow
    'matrix.example.org', 'https://matrix.example.org', '@bot:example.org', 'password', '', '#general:example.org', '@alice:example.org',
    // irc: host, tls, port, nick, channels, allow
    'irc.example.org', 'no', '', 'sbot', '#one, #two', 'alice, *!*@trusted.example.org',
    // email: address, imap, smtp, user, password variable, allow (empty is asked again)
    'bot@example.org', '', 'smtp.example.org', '', '', '', 'alice@example.org, *@example.org',
    // webhook: secret variable, allow
    '', '',
    // gateway (forced on by webhook): listen off loopback, so a token variable is required
    '0.0.0.0:8787', '',
  ];
  const { code, out } = await onboard(answers, target);
  assert.equal(code, 0, out);
  assert.match(out, /must be an http:\/\/ or https:\/\/ URL; try again/);
  assert.match(out, /at least one is needed; try again/);
  assert.match(out, /The webhook channel is served by the HTTP gateway/);
  const env = {
    OPENAI_API_KEY: 'k', TELEGRAM_BOT_TOKEN: 't', DISCORD_TOKEN_2: 'd', SLACK_BOT_TOKEN: 'xoxb', SLACK_SIGNING_SECRET: 's', MATRIX_PASSWORD: 'p',
    EMAIL_PASSWORD: 'e', WEBHOOK_SECRET: 'w', SWITCHBOARD_TOKEN: '0123456789abcdef0123',
  };
  const { config } = loadConfig(target, env);
  assert.deepEqual(Object.keys(config.channels).sort(), ['discord', 'email', 'irc', 'matrix', 'slack', 'telegram', 'terminal', 'webhook']);
  assert.deepEqual(config.channels.telegram?.allow, ['*']);
  assert.equal(config.channels.discord?.token, 'd');
  assert.deepEqual(config.channels.discord?.allow, ['80351110224678912']);
  assert.equal(config.channels.slack?.signing_secret, 's');
  assert.equal(config.channels.slack?.listen, '127.0.0.1:3001');
  assert.equal(config.channels.matrix?.homeserver, 'https://matrix.example.org');
  assert.equal(config.channels.matrix?.password, 'p');
  assert.deepEqual(config.channels.matrix?.rooms, ['#general:example.org']);
  assert.deepEqual(config.channels.matrix?.allow, ['@alice:example.org']);
  assert.deepEqual({ host: config.channels.irc?.host, tls: config.channels.irc?.tls, port: config.channels.irc?.port, nick: config.channels.irc?.nick }, { host: 'irc.example.org', tls: false, port: 6667, nick: 'sbot' });
  assert.deepEqual(config.channels.irc?.channels, ['#one', '#two']);
  assert.deepEqual(config.channels.irc?.allow, ['alice', '*!*@trusted.example.org']);
  assert.equal(config.channels.email?.imap.host, 'mail.example.org');
  assert.equal(config.channels.email?.smtp.host, 'smtp.example.org');
  assert.equal(config.channels.email?.imap.user, 'bot@example.org');
  assert.deepEqual(config.channels.email?.allow, ['alice@example.org', '*@example.org']);
  assert.equal(config.channels.webhook?.secret, 'w');
  assert.deepEqual(config.gateway && { listen: config.gateway.listen, token: config.gateway.token }, { listen: '0.0.0.0:8787', token: env.SWITCHBOARD_TOKEN });
  assert.doesNotThrow(() => validateGatewayConfig(config.gateway!, target), 'the daemon would accept the gateway');
  for (const name of ['TELEGRAM_BOT_TOKEN', 'DISCORD_TOKEN_2', 'SLACK_SIGNING_SECRET', 'MATRIX_PASSWORD', 'EMAIL_PASSWORD', 'WEBHOOK_SECRET', 'SWITCHBOARD_TOKEN']) {
    assert.match(out, new RegExp(`export ${name}=`), name);
  }
});

test('a key the endpoint refuses: nothing written unless confirmed', async (t) => {
  const model = await startFakeOpenAI();
  t.after(() => model.close());
  const dir = tempDir(t);
  model.script({ status: 401, body: JSON.stringify({ error: { message: 'Incorrect API key' } }) });
  const target = join(dir, 'switchboard.toml');
  const { code, out } = await onboard(['openai', model.baseUrl, 'scripted', 'MY_KEY', 'sk-bad', 'terminal', 'no', 'no'], target);
  assert.equal(code, 1, out);
  assert.match(out, /✗ .*401/);
  assert.throws(() => statSync(target));
});

test('answers that run out: exit 2, nothing written', async (t) => {
  const dir = tempDir(t);
  const target = join(dir, 'switchboard.toml');
  const { code, out } = await onboard(['ollama', '', '', 'matrix', 'not a url'], target);
  assert.equal(code, 2, out);
  assert.match(out, /the input ended before an answer to "Matrix: homeserver URL/);
  assert.equal(existsSync(target), false);
  const config = parseConfig('[provider]\nkind = "openai"\nmodel = "m"\n', undefined);
  assert.equal(config.gateway, undefined);
});

/** The real CLI on a pseudo-terminal (util-linux `script`), typed at like a person: answer when the question shows. */
function onTerminal(args: readonly string[], env: NodeJS.ProcessEnv) {
  const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;
  const child = spawn('script', ['-q', '-e', '-c', [process.execPath, cliPath, ...args].map(quote).join(' '), '/dev/null'], { env: { ...process.env, ...env } });
  let screen = '';
  child.stdout.on('data', (chunk: Buffer) => (screen += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    screen: () => screen,
    exited,
    /** Waits for `question` to be on screen (after what was seen so far), then types `keys`. */
    async answer(question: RegExp, keys: string, timeoutMs = 10_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!question.test(screen)) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${question}; the screen:\n${screen}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      child.stdin.write(keys);
    },
    kill: () => child.kill('SIGKILL'),
  };
}

const hasScript = existsSync('/usr/bin/script') ? false : 'needs util-linux script (Debian bsdutils) for a pseudo-terminal';

test('at a terminal the API key is not echoed (typed on a pseudo-terminal)', { skip: hasScript, timeout: 60_000 }, async (t) => {
  const model = await startFakeOpenAI();
  const dir = tempDir(t);
  const target = join(dir, 'switchboard.toml');
  const term = onTerminal(['onboard', '--config', target], { SWITCHBOARD_CONFIG: '' });
  t.after(async () => {
    term.kill();
    await model.close();
  });
  const key = 'sk-typed-at-a-terminal-0042';
  await term.answer(/Model provider .*: $/, 'openai\r');
  await term.answer(/Endpoint URL .*: $/, `${model.baseUrl}\r`);
  await term.answer(/Model \[gpt-4o-mini\]: $/, 'scripted\r');
  await term.answer(/Environment variable that will hold the API key \[OPENAI_API_KEY\]: $/, 'TYPED_KEY\r');
  // Typed with a slip corrected by Backspace, as a person would.
  await term.answer(/API key \(hidden.*: $/, `${key}x\u007f\r`);
  await term.answer(/Channels, comma-separated .*: $/, 'terminal\r');
  await term.answer(/HTTP gateway .*\[yes\]: $/, '\r');
  await term.answer(/Gateway: address .*: $/, '\r');
  await term.answer(/Gateway: environment variable for its bearer token .*: $/, '\r');
  assert.equal(await term.exited, 0, term.screen());
  const screen = term.screen();
  assert.doesNotMatch(screen, new RegExp(key), 'the key never reaches the screen');
  assert.match(screen, /TYPED_KEY/, 'ordinary answers are echoed as usual');
  assert.match(screen, /✓ openai scripted/);
  assert.equal(model.requests.at(-1)?.headers.authorization, `Bearer ${key}`, 'the key as typed, Backspace applied');
  assert.doesNotMatch(readFileSync(target, 'utf8'), new RegExp(key));
});

test('Ctrl-C at the hidden key prompt: exit 130, nothing written, the terminal back to normal', { skip: hasScript, timeout: 60_000 }, async (t) => {
  const dir = tempDir(t);
  const target = join(dir, 'switchboard.toml');
  const term = onTerminal(['onboard', '--config', target], { SWITCHBOARD_CONFIG: '' });
  t.after(() => term.kill());
  await term.answer(/Model provider .*: $/, 'anthropic\r');
  await term.answer(/Endpoint URL .*: $/, '\r');
  await term.answer(/Model .*: $/, '\r');
  await term.answer(/Environment variable .*: $/, 'SB_TEST_UNSET_KEY\r');
  await term.answer(/API key \(hidden.*: $/, 'sk-half\u0003');
  assert.equal(await term.exited, 130, term.screen());
  assert.match(term.screen(), /interrupted; nothing was written/);
  assert.equal(existsSync(target), false);
});
