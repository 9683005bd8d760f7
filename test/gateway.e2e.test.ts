/**
 * The gateway of a real daemon: health and readiness, Prometheus metrics after real traffic,
 * `switchboard status` against it, and the refusal to expose it without a token.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startTelegramPeer, type TelegramPeer } from './peers/telegram.ts';
import { runCli, startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { until } from './support/wait.ts';
import { freePort } from './support/net.ts';

const env = { TEST_MODEL_KEY: 'sk-gw', SWITCHBOARD_TOKEN: 'gateway-e2e-token-0123456789' };

/** One raw HTTP/1.1 exchange (fetch will not send a foreign Host); resolves with the status line's code. */
function rawStatus(port: number, lines: readonly string[], body = ''): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(`${[...lines, `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close'].join('\r\n')}\r\n\r\n${body}`));
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (match) {
        socket.destroy();
        resolve(Number(match[1]));
      }
    });
    socket.on('error', reject);
    socket.on('end', () => reject(new Error(`no status line: ${JSON.stringify(text)}`)));
  });
}
const upgrade = (path: string, host: string, extra: readonly string[] = []): string[] => [`GET ${path} HTTP/1.1`, `Host: ${host}`, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', ...extra];


describe('gateway (end to end)', () => {
  let model: FakeOpenAI;
  let peer: TelegramPeer;
  let daemon: Daemon;
  let config: ReturnType<typeof tempConfig>;
  let base: string;
  const auth = { authorization: `Bearer ${env.SWITCHBOARD_TOKEN}` };

  before(async () => {
    model = await startFakeOpenAI();
    peer = await startTelegramPeer();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    config = tempConfig(
      model.baseUrl,
      `[log]\nformat = "json"\n[gateway]\nlisten = "127.0.0.1:${port}"\ntoken = "\${SWITCHBOARD_TOKEN}"\n[gateway.remote_tools]\ncall_timeout_seconds = 10\nallow = ["phone_*", "current_time"]\n${peer.configSection()}allow = ["*"]\n`,
    );
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  });
  after(async () => {
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    config.cleanup();
    await peer.close();
    await model.close();
  });

  it("refuses a remote tool that takes a built-in tool's name, even before any turn has loaded the built-ins", async () => {
    // The built-in tools load on first use; this runs before the suite's first turn. Before the
    // tool socket waited for them, the registry saw no built-in yet and took "current_time".
    const phone = new WebSocket(`${base.replace('http', 'ws')}/ws/tools?client=early`, { headers: auth } as unknown as string[]);
    const frames: Array<Record<string, unknown>> = [];
    phone.addEventListener('message', (event) => frames.push(JSON.parse(String(event.data)) as Record<string, unknown>));
    await new Promise((resolve) => phone.addEventListener('open', resolve, { once: true }));
    phone.send(JSON.stringify({ type: 'register_tools', tools: [{ name: 'current_time', description: 'not the clock', parameters: { type: 'object', properties: {} } }] }));
    await until(() => frames.some((f) => f.type === 'tools_registered'), 'tools_registered');
    const registered = frames.find((f) => f.type === 'tools_registered')!;
    assert.deepEqual(registered.accepted, [], JSON.stringify(registered));
    assert.deepEqual(registered.rejected, [{ name: 'current_time', reason: 'a built-in or MCP tool already has this name' }]);
    phone.close();
  });

  it('answers /healthz and /readyz openly, and /metrics only with the token', async () => {
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    assert.equal((await fetch(`${base}/metrics`)).status, 401);
    assert.equal((await fetch(`${base}/api/status`)).status, 401);
  });

  it('counts real traffic in /metrics', async () => {
    await peer.post('alice', { kind: 'dm', user: 'alice' }, 'count me');
    await until(() => peer.botMessages({ kind: 'dm', user: 'alice' }).length === 1, 'the reply');
    // The peer records the reply a moment before the daemon counts it as sent: scrape until it has.
    let text = '';
    const deadline = Date.now() + 5000;
    do text = await (await fetch(`${base}/metrics`, { headers: auth })).text();
    while (!text.includes('switchboard_messages_sent_total{channel="telegram"} 1') && Date.now() < deadline);
    const value = (name: string): number | undefined => {
      const line = text.split('\n').find((l) => l.startsWith(name));
      return line === undefined ? undefined : Number(line.split(' ').at(-1));
    };
    assert.equal(value('switchboard_messages_received_total{channel="telegram"}'), 1, text);
    assert.equal(value('switchboard_messages_sent_total{channel="telegram"}'), 1, text);
    assert.equal(value('switchboard_turn_duration_seconds_count{outcome="answered"}'), 1, text);
    assert.ok((value('process_resident_memory_bytes') ?? 0) > 10_000_000);
    assert.match(text, /switchboard_provider_request_duration_seconds_count\{provider="openai"\} 1/);
  });

  it('`switchboard status` asks the running daemon', async () => {
    const human = await runCli(['status', '--config', config.file], { env });
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /telegram\s+running/);
    // The first line names the version, as the README's sample shows (issue 25: it did not).
    const version = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
    assert.match(human.stdout, new RegExp(`^Switchboard ${version.replace(/\./g, '\\.')} · pid \\d+ · up \\d+s \\(since \\d{4}-`));
    const json = await runCli(['status', '--json', '--config', config.file], { env });
    assert.equal(json.code, 0, json.stderr);
    const report = JSON.parse(json.stdout) as { channels: Array<{ name: string; state: string }> };
    // `web` is the console's browser chat ([gateway] console = true by default).
    assert.deepEqual(report.channels.map((c) => [c.name, c.state]), [['telegram', 'running'], ['web', 'running']]);
  });

  it('offers a tool registered over /ws/tools to the model, and lists it in /api/tools', async () => {
    const refused = new WebSocket(`${base.replace('http', 'ws')}/ws/tools?client=nobody`);
    await new Promise((resolve) => refused.addEventListener('error', resolve, { once: true }));
    const phone = new WebSocket(`${base.replace('http', 'ws')}/ws/tools?client=phone`, { headers: auth } as unknown as string[]);
    const frames: Array<Record<string, unknown>> = [];
    phone.addEventListener('message', (event) => {
      const frame = JSON.parse(String(event.data)) as Record<string, unknown>;
      frames.push(frame);
      if (frame.type === 'tool_call_request') phone.send(JSON.stringify({ type: 'tool_result', id: frame.id, output: 'battery at 81%' }));
    });
    await new Promise((resolve) => phone.addEventListener('open', resolve, { once: true }));
    phone.send(JSON.stringify({ type: 'register_tools', tools: [{ name: 'phone_battery', description: 'Battery level of the phone', parameters: { type: 'object', properties: {} } }] }));
    await until(() => frames.some((f) => f.type === 'tools_registered'), 'tools_registered');
    const listed = (await (await fetch(`${base}/api/tools`, { headers: auth })).json()) as { tools: Array<{ name: string; source: string }> };
    assert.ok(listed.tools.some((t) => t.name === 'phone_battery' && t.source === 'remote:phone'), JSON.stringify(listed));
    model.script({ toolCalls: [{ name: 'phone_battery', arguments: {} }] }, { text: 'The phone is at 81%.' });
    const dm = { kind: 'dm', user: 'alice' } as const;
    const before = peer.botMessages(dm).length;
    await peer.post('alice', dm, 'how is my battery?');
    await until(() => peer.botMessages(dm).length > before, 'the approval question');
    // A remote tool can do anything: in supervised autonomy (the default) the person is asked first.
    assert.match(peer.botMessages(dm).at(-1)!.text, /approval[\s\S]*remote phone_battery/);
    await peer.post('alice', dm, 'yes');
    await until(() => peer.botMessages(dm).length > before + 1, 'the reply');
    assert.equal(peer.botMessages(dm).at(-1)!.text, 'The phone is at 81%.');
    assert.match(JSON.stringify(model.requests.at(-1)!.body.messages), /battery at 81%/, 'the tool result reached the model');
    assert.ok(frames.some((f) => f.type === 'result_acknowledged'));
    phone.close();
  });

  it('wants the token on the tool socket (401 without or with a wrong one), and refuses a web page even with it (403)', async () => {
    const port = Number(new URL(base).port);
    const host = `127.0.0.1:${port}`;
    assert.equal(await rawStatus(port, upgrade('/ws/tools?client=x', host)), 401);
    assert.equal(await rawStatus(port, upgrade('/ws/tools?client=x', host, ['Authorization: Bearer wrong-token-0123456789'])), 401);
    assert.equal(await rawStatus(port, upgrade('/ws/tools?client=x', host, [`Authorization: ${auth.authorization}`, 'Origin: https://evil.example'])), 403);
    assert.equal(await rawStatus(port, upgrade('/ws/tools?client=x', host, [`Authorization: ${auth.authorization}`])), 101);
  });

  it('refuses to expose the gateway off loopback without a token (exit 78)', async () => {
    const exposed = tempConfig(model.baseUrl, `[gateway]\nlisten = "0.0.0.0:0"\n[channels.terminal]\n`);
    try {
      const result = await runCli(['start', '--config', exposed.file], { env });
      assert.equal(result.code, 78);
      assert.match(result.stderr, /gateway\.token/);
    } finally {
      exposed.cleanup();
    }
  });
});

describe('gateway without a token (the default), against web pages', () => {
  let model: FakeOpenAI;
  let daemon: Daemon;
  let config: ReturnType<typeof tempConfig>;
  let port: number;

  before(async () => {
    model = await startFakeOpenAI();
    port = await freePort();
    config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n[gateway]\nlisten = "127.0.0.1:${port}"\n[gateway.remote_tools]\n[channels.webhook]\nsecret = "e2e-webhook-secret"\n`);
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  });
  after(async () => {
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    config.cleanup();
    await model.close();
  });

  it('answers no rebound Host name (DNS rebinding): status, tools, metrics and the tool socket', async () => {
    for (const path of ['/api/status', '/api/tools', '/metrics']) {
      assert.equal(await rawStatus(port, [`GET ${path} HTTP/1.1`, `Host: evil.example:${port}`]), 403, path);
      assert.equal(await rawStatus(port, [`GET ${path} HTTP/1.1`, `Host: localhost:${port}`]), 200, path);
    }
    assert.equal(await rawStatus(port, upgrade('/ws/tools?client=evil', `evil.example:${port}`)), 403);
  });

  it('lets no web page register a tool (a foreign Origin on the upgrade is refused)', async () => {
    assert.equal(await rawStatus(port, upgrade('/ws/tools?client=evil', `127.0.0.1:${port}`, ['Origin: https://evil.example'])), 403);
    assert.equal(await rawStatus(port, upgrade('/ws/tools?client=phone', `127.0.0.1:${port}`)), 101, 'a program (no Origin) still connects');
  });

  it('takes no cross-site reload (text/plain or a foreign Origin), and `switchboard reload` still works', async () => {
    const host = `Host: 127.0.0.1:${port}`;
    assert.equal(await rawStatus(port, ['POST /api/reload HTTP/1.1', host, 'Content-Type: text/plain'], '{}'), 415);
    assert.equal(await rawStatus(port, ['POST /api/reload HTTP/1.1', host, 'Content-Type: application/json', 'Origin: https://evil.example'], '{}'), 403);
    assert.doesNotMatch(daemon.stdout(), /config reloaded|"msg":"reload/);
    const result = await runCli(['reload', '--config', config.file], { env });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /config reloaded/);
  });
});
