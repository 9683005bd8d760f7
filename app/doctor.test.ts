import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { startFakeOpenAI, type FakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { runCli } from '../test/support/cli.ts';
import { runDoctor, type CheckResult } from './doctor.ts';

const GOOD = 'good-token-123';
let model: FakeOpenAI;
let platforms: Server;
let platformUrl: string;
let tcp: TcpServer[] = [];
let ports: { irc: number; imap: number; smtp: number; closed: number };
let dir: string;

/** One local peer answering each platform's identity call: the good token passes, any other is refused as the platform would. */
function startPlatforms(): Promise<Server> {
  const server = createServer((req, res) => {
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const url = req.url ?? '';
    const bearer = req.headers.authorization;
    if (url.startsWith('/telegram/bot')) {
      return url === `/telegram/bot${GOOD}/getMe` ? json(200, { ok: true, result: { id: 1, is_bot: true, username: 'doctor_bot' } }) : json(401, { ok: false, error_code: 401, description: 'Unauthorized' });
    }
    if (url === '/discord/v10/users/@me') return bearer === `Bot ${GOOD}` ? json(200, { id: '1', username: 'doctorbot', bot: true }) : json(401, { message: '401: Unauthorized', code: 0 });
    if (url === '/slack/auth.test') return json(200, bearer === `Bearer ${GOOD}` ? { ok: true, user: 'doctorbot', team: 'Team' } : { ok: false, error: 'invalid_auth' });
    if (url === '/_matrix/client/v3/account/whoami') return bearer === `Bearer ${GOOD}` ? json(200, { user_id: '@bot:localhost' }) : json(401, { errcode: 'M_UNKNOWN_TOKEN', error: 'Unknown token' });
    if (url === '/refusing/v1/models') return json(401, { error: { message: `Incorrect API key provided: ${bearer?.slice(7)}` } });
    if (url === '/listing/v1/models') return json(200, { object: 'list', data: [{ id: 'gpt-4o-mini' }, { id: 'gpt-4o' }] });
    json(404, { error: 'no route' });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** A TCP peer that greets like a mail server, or answers like an IRC server once spoken to. */
function startGreeter(greeting: string | undefined, onLine?: string): Promise<TcpServer> {
  const server = createTcpServer((socket) => {
    socket.on('error', () => {});
    if (greeting) socket.write(greeting);
    if (onLine) socket.once('data', () => socket.write(onLine));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const portOf = (server: Server | TcpServer) => (server.address() as AddressInfo).port;

before(async () => {
  model = await startFakeOpenAI();
  platforms = await startPlatforms();
  platformUrl = `http://127.0.0.1:${portOf(platforms)}`;
  const irc = await startGreeter(undefined, ':irc.local CAP * LS :multi-prefix sasl\r\n');
  const imap = await startGreeter('* OK [CAPABILITY IMAP4rev1] ready\r\n');
  const smtp = await startGreeter('220 mail.local ESMTP\r\n');
  const closing = await startGreeter(undefined);
  tcp = [irc, imap, smtp];
  ports = { irc: portOf(irc), imap: portOf(imap), smtp: portOf(smtp), closed: portOf(closing) };
  await new Promise<void>((resolve) => closing.close(() => resolve()));
  dir = mkdtempSync(join(tmpdir(), 'doctor-'));
});

after(async () => {
  await model.close();
  platforms.closeAllConnections();
  await new Promise<void>((resolve) => platforms.close(() => resolve()));
  for (const server of tcp) server.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Case {
  readonly provider?: string;
  readonly channels?: string;
  readonly dataDir?: string;
  readonly unitPaths?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
}

let n = 0;
/** Writes a config into a fresh directory and runs the doctor on it with --json. */
async function doctor(options: Case, args: readonly string[] = ['--json']): Promise<{ code: number; out: string; err: string; results: CheckResult[] }> {
  const home = join(dir, `case${++n}`);
  mkdirSync(home, { recursive: true });
  const data = options.dataDir ?? join(home, 'data');
  if (options.dataDir === undefined) mkdirSync(data, { mode: 0o700 });
  const file = join(home, 'switchboard.toml');
  writeFileSync(
    file,
    `data_dir = ${JSON.stringify(data)}\n${options.provider ?? `[provider]\nkind = "openai"\nbase_url = "${model.baseUrl}"\nmodel = "scripted"\napi_key = "\${MODEL_KEY}"\n`}\n${options.channels ?? ''}`,
  );
  let out = '';
  let err = '';
  const sink = (append: (text: string) => void) => new Writable({ write: (chunk: Buffer, _encoding, done) => (append(chunk.toString('utf8')), done()) });
  const code = await runDoctor(args, {
    stdout: sink((text) => (out += text)),
    stderr: sink((text) => (err += text)),
    env: { MODEL_KEY: 'sk-test-secret', ...options.env },
    configFlag: file,
    home,
    timeoutMs: 3000,
    unitPaths: options.unitPaths ?? [join(home, 'none.service')],
  });
  return { code, out, err, results: args.includes('--json') ? (JSON.parse(out) as CheckResult[]) : [] };
}

const byName = (results: readonly CheckResult[], name: string): CheckResult => {
  const found = results.find((result) => result.check === name);
  assert.ok(found, `no "${name}" check in ${JSON.stringify(results.map((r) => r.check))}`);
  return found;
};

const allChannels = (token: string) => `
[channels.telegram]
token = "${token}"
api_root = "${platformUrl}/telegram"
[channels.discord]
token = "${token}"
api_base = "${platformUrl}/discord"
[channels.slack]
bot_token = "${token}"
app_token = "xapp-1"
api_url = "${platformUrl}/slack/"
[channels.matrix]
homeserver = "${platformUrl}"
user_id = "@bot:localhost"
access_token = "${token}"
[channels.irc]
host = "127.0.0.1"
port = ${ports.irc}
tls = false
nick = "doctor"
[channels.email]
address = "bot@localhost"
allow = ["alice@localhost"]
imap = { host = "127.0.0.1", port = ${ports.imap}, tls = false, user = "bot", password = "pw" }
smtp = { host = "127.0.0.1", port = ${ports.smtp}, tls = false, user = "bot", password = "pw" }
`;

test('a good config: every check passes, one ✓ line each, exit 0', async () => {
  const { code, out } = await doctor({ channels: allChannels(GOOD) }, []);
  assert.equal(code, 0, out);
  const lines = out.trim().split('\n');
  for (const name of ['config', 'provider', 'channel telegram', 'channel discord', 'channel slack', 'channel matrix', 'channel irc', 'channel email (IMAP)', 'channel email (SMTP)', 'data_dir', 'service']) {
    assert.ok(lines.some((line) => line.startsWith(`✓ ${name} — `)), `no ✓ ${name} line in:\n${out}`);
  }
  assert.match(out, /@doctor_bot/);
  assert.match(out, /All checks passed\./);
  assert.doesNotMatch(out, /sk-test-secret/);
  // The fake has no /models, so the doctor made one real (tiny) chat call with the key.
  assert.equal(model.requests.at(-1)?.headers.authorization, 'Bearer sk-test-secret');
});

test('--json prints {check, ok, detail, fix} for each check', async () => {
  const { code, results } = await doctor({ provider: `[provider]\nkind = "openai"\nbase_url = "${platformUrl}/listing/v1"\nmodel = "gpt-4o-mini"\n` });
  assert.equal(code, 0);
  assert.deepEqual(
    results.map((result) => result.check),
    ['config', 'provider', 'data_dir', 'disk', 'database', 'service'],
  );
  for (const result of results) assert.equal(typeof result.detail, 'string');
  assert.match(byName(results, 'provider').detail, /no key configured; the endpoint answered without one, model available/);
});

test('bad channel tokens: ✗ with the fix for each platform, exit 1, the token never printed', async () => {
  const { code, out, results } = await doctor({ channels: allChannels('wrong-token-456') });
  assert.equal(code, 1);
  const telegram = byName(results, 'channel telegram');
  assert.equal(telegram.ok, false);
  assert.match(telegram.detail, /rejected \(HTTP 401/);
  assert.match(telegram.fix ?? '', /BotFather/);
  assert.match(byName(results, 'channel discord').fix ?? '', /Reset Token/);
  assert.match(byName(results, 'channel slack').detail, /invalid_auth/);
  assert.match(byName(results, 'channel matrix').detail, /M_UNKNOWN_TOKEN/);
  assert.equal(byName(results, 'channel irc').ok, true);
  assert.doesNotMatch(out, /wrong-token-456/);
});

test('the text report: ✗ lines carry "; fix: …" and a summary', async () => {
  const { code, out } = await doctor({ channels: `[channels.telegram]\ntoken = "bad"\napi_root = "${platformUrl}/telegram"\n` }, []);
  assert.equal(code, 1);
  assert.match(out, /^✗ channel telegram — the bot token was rejected .*; fix: copy the token from @BotFather/m);
  assert.match(out, /1 check failed\./);
});

test('an unreachable provider and a refused key', async () => {
  const down = await doctor({ provider: `[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:${ports.closed}/v1"\nmodel = "m"\n` });
  assert.equal(down.code, 1);
  assert.equal(byName(down.results, 'provider').ok, false);
  assert.match(byName(down.results, 'provider').detail, /unreachable: ECONNREFUSED/);
  assert.match(byName(down.results, 'provider').fix ?? '', /base_url/);

  const refused = await doctor({ provider: `[provider]\nkind = "openai"\nbase_url = "${platformUrl}/refusing/v1"\nmodel = "m"\napi_key = "\${MODEL_KEY}"\n` });
  assert.equal(refused.code, 1);
  assert.match(byName(refused.results, 'provider').detail, /refused the key \(HTTP 401/);
  assert.doesNotMatch(refused.out, /sk-test-secret/, 'the key echoed by the endpoint is redacted');
});

test('a data_dir that cannot be created, and one open to other users', async () => {
  const blocker = join(dir, 'a-file');
  writeFileSync(blocker, '');
  const blocked = await doctor({ dataDir: join(blocker, 'data') });
  assert.equal(blocked.code, 1);
  assert.match(byName(blocked.results, 'data_dir').detail, /is not a directory/);

  const open = join(dir, 'open');
  mkdirSync(open);
  chmodSync(open, 0o755);
  const shared = await doctor({ dataDir: open });
  assert.equal(shared.code, 1);
  assert.equal(byName(shared.results, 'data_dir').fix, `chmod 700 ${open}`);

  const proc = await doctor({ dataDir: '/proc/switchboard-doctor/data' });
  assert.equal(byName(proc.results, 'data_dir').ok, false);
  // Only root gets as far as mkdir there (others may not write /proc at all).
  if (process.getuid?.() === 0) assert.match(byName(proc.results, 'data_dir').detail, /\/proc does not take new directories/);

  const fresh = await doctor({ dataDir: join(dir, 'not-yet', 'data') });
  assert.equal(byName(fresh.results, 'data_dir').ok, true, 'a data_dir that can be created is fine');
});

test('a config error is one ✗ line with the fix; the network is not touched', async () => {
  const before = model.requests.length;
  const { code, results } = await doctor({ provider: `[provider]\nkind = "openai"\n` });
  assert.equal(code, 1);
  assert.equal(results[0]!.check, 'config');
  assert.equal(results[0]!.ok, false);
  assert.match(results[0]!.detail, /provider\.model: is required but missing/);
  assert.match(results[0]!.fix ?? '', /model = "gpt-4o-mini"/);
  assert.deepEqual(results.map((result) => result.check), ['config', 'service']);
  assert.equal(model.requests.length, before);
});

test('an installed unit whose ExecStart is gone', async () => {
  const unit = join(dir, 'switchboard.service');
  writeFileSync(unit, `[Service]\nExecStart=${process.execPath} ${join(dir, 'gone/dist/app/cli.js')} start --config /nowhere/config.toml\n`);
  const { code, results } = await doctor({ unitPaths: [unit] });
  assert.equal(code, 1);
  const service = byName(results, 'service');
  assert.match(service.detail, /gone\/dist\/app\/cli\.js does not exist/);
  assert.match(service.detail, /config \/nowhere\/config\.toml does not exist/);
  assert.match(service.fix ?? '', /service install/);
});

test('usage error: exit 2', async () => {
  const { code, err } = await doctor({}, ['--bogus']);
  assert.equal(code, 2);
  assert.match(err, /unexpected argument "--bogus"/);
});

test('no key configured: doctor says so instead of "key accepted"', async () => {
  const keyless = (base: string) => `[provider]\nkind = "openai"\nbase_url = "${base}"\nmodel = "gpt-4o-mini"\n`;
  // An endpoint without /models: one chat call, answered without a key.
  const chat = await doctor({ provider: keyless(model.baseUrl) });
  const detail = byName(chat.results, 'provider').detail;
  assert.match(detail, /answered a test message \(no key configured; the endpoint answered without one\)/);
  assert.doesNotMatch(detail, /key accepted/);
  // An endpoint that lists its models without a key (Ollama).
  const listing = await doctor({ provider: keyless(`${platformUrl}/listing/v1`) });
  assert.match(byName(listing.results, 'provider').detail, /: no key configured; the endpoint answered without one, model available$/);
  // With a key: that is what was checked.
  const keyed = await doctor({ provider: `${keyless(`${platformUrl}/listing/v1`)}api_key = "\${MODEL_KEY}"\n` });
  assert.match(byName(keyed.results, 'provider').detail, /: key accepted, model available$/);
  // One that wants a key.
  const refusing = await doctor({ provider: keyless(`${platformUrl}/refusing/v1`) });
  const provider = byName(refusing.results, 'provider');
  assert.equal(provider.ok, false);
  assert.match(provider.detail, /asks for a key, and none is configured \(HTTP 401/);
  assert.match(provider.fix ?? '', /set provider\.api_key/);
});

test('a fresh install passes the data_dir check: Switchboard creates its data_dir 0700', async () => {
  const home = join(dir, 'fresh-install');
  mkdirSync(home);
  const file = join(home, 'switchboard.toml');
  writeFileSync(file, `data_dir = "./data"\n[provider]\nkind = "openai"\nbase_url = "${model.baseUrl}"\nmodel = "scripted"\napi_key = "\${MODEL_KEY}"\n[channels.terminal]\nuser = "tester"\n`);
  // The first run creates the data_dir, as a new user's first `chat` does (under the usual umask 022).
  const first = await runCli(['chat', '--config', file], { env: { MODEL_KEY: 'sk-test-secret' }, cwd: home });
  assert.equal(first.code, 0, first.stderr);
  assert.equal(statSync(join(home, 'data')).mode & 0o777, 0o700);
  for (const private_ of ['switchboard.db', 'switchboard.lock']) assert.equal(statSync(join(home, 'data', private_)).mode & 0o777, 0o600, private_);
  let out = '';
  const code = await runDoctor(['--json'], {
    stdout: new Writable({ write: (chunk: Buffer, _encoding, done) => ((out += chunk.toString('utf8')), done()) }),
    stderr: new Writable({ write: (_chunk, _encoding, done) => done() }),
    env: { MODEL_KEY: 'sk-test-secret' },
    configFlag: file,
    home,
    timeoutMs: 3000,
    unitPaths: [join(home, 'none.service')],
  });
  const results = JSON.parse(out) as CheckResult[];
  const check = byName(results, 'data_dir');
  assert.equal(check.ok, true, JSON.stringify(check));
  assert.match(check.detail, /writable and private \(mode 700\)/);
  assert.equal(code, 0, out);
});

test('the database check reads every page: ✓ for a whole one (leaving no -wal or -shm), ✗ with the restore for a damaged one', async () => {
  const { checkDatabase } = await import('./doctor.ts');
  const { openDatabase } = await import('../src/store/db.ts');
  const home = join(dir, 'database-check');
  mkdirSync(home);
  const path = join(home, 'switchboard.db');
  assert.match((await checkDatabase(path)).detail, /no database yet/);
  openDatabase(path).close();
  const whole = await checkDatabase(path);
  assert.equal(whole.ok, true, JSON.stringify(whole));
  assert.match(whole.detail, /quick_check ok/);
  assert.deepEqual(readdirSync(home), ['switchboard.db'], 'nothing left beside it');
  writeFileSync(path, 'not a database, just text that is long enough to fill the header of one. '.repeat(3));
  const damaged = await checkDatabase(path);
  assert.equal(damaged.ok, false);
  assert.match(damaged.detail, /is damaged: it is not a SQLite database .*\(SQLITE_NOTADB\)/);
  assert.match(damaged.fix!, /Backup and restore/);
});
