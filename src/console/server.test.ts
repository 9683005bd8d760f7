/**
 * The console's HTTP API against fake stores: sign-in (wrong token, rate limit, cookie
 * attributes), sessions ending with the token, CSRF on every change, cross-origin refusal,
 * strict headers, and bad input (oversized bodies, wrong types, wrong content type) answered
 * with a clear 4xx while nothing changes.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { createConsole } from './server.ts';
import type { ConsoleDeps, PendingCode } from './deps.ts';
import type { ConsoleQueries } from './queries.ts';
import { maskText, unmaskText, maskObject, masked } from './mask.ts';

const token = 'console-test-token-0123456789';

describe('console API', () => {
  let server: Server;
  let base: string;
  let dir: string;
  let currentToken: string | undefined = token;
  const changes: string[] = [];
  let pending: PendingCode[] = [];
  const posted: string[] = [];

  const queries: ConsoleQueries = {
    conversations: async () => [],
    search: async () => [],
    transcript: async () => [],
    pendingApprovals: async () => [{ conversation: 'telegram:bot:1', channel: 'telegram', senderId: '1', createdAt: 0, calls: [] }],
    approvedSenders: async () => [],
    revokeSender: async (channel, sender) => {
      changes.push(`revoke ${channel} ${sender}`);
      return true;
    },
    denyCode: async (channel, code) => {
      changes.push(`deny ${channel} ${code}`);
      return true;
    },
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sb-console-'));
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>console</title>');
    writeFileSync(join(dir, 'assets', 'app-1.js'), 'export {}');
    const deps: ConsoleDeps = {
      log: pino({ level: 'silent' }),
      token: () => currentToken,
      sessionMs: 60_000,
      staticDir: dir,
      maxJsonBytes: 1024,
      overview: () => ({ status: { pid: 1, startedAt: new Date(0).toISOString(), uptimeSeconds: 1, channels: [], queued: 0, inFlight: 0, pendingReplies: 0, totals: { received: 0, duplicates: 0, answered: 0, failed: 0, ignored: 0, sent: 0 } }, model: 'm', node: 'n', activity: [] }),
      restartChannel: (name) => {
        changes.push(`restart ${name}`);
        return name === 'telegram';
      },
      queries,
      pairing: {
        pending: () => pending,
        approve: (channel, code) => {
          changes.push(`approve ${channel} ${code}`);
          return code === 'ABC234' ? 'alice' : undefined;
        },
      },
      approvals: { clear: (conversation) => void changes.push(`clear ${conversation}`) },
      allowLists: () => ({ telegram: undefined }),
      tools: () => [],
      remoteClients: () => [],
      toolCalls: () => [],
      chat: {
        post: async (operator, text, files) => {
          posted.push(`${operator}: ${text} (${files.map((f) => `${f.name} ${f.data.length}`).join(', ')})`);
          return { id: 'm1' };
        },
        subscribe: () => () => undefined,
        file: () => undefined,
        conversation: (operator) => `web:console:${operator}`,
      },
    };
    const handler = createConsole(deps);
    server = createServer((request, response) => void handler(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    changes.length = 0;
    posted.length = 0;
    currentToken = token;
    pending = [];
  });

  /** Signs in from a distinct address-free client; returns the cookie and CSRF token. */
  async function signIn(name = 'ada'): Promise<{ cookie: string; csrf: string }> {
    const response = await fetch(`${base}/api/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token, name }) });
    assert.equal(response.status, 200);
    const setCookie = response.headers.get('set-cookie') ?? '';
    const body = (await response.json()) as { csrf: string };
    return { cookie: setCookie.split(';')[0]!, csrf: body.csrf };
  }

  const post = (path: string, body: unknown, headers: Record<string, string>): Promise<Response> =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });

  it('serves the page with a strict CSP, no framing and nosniff; assets are immutable', async () => {
    const page = await fetch(`${base}/`);
    assert.equal(page.status, 200);
    const csp = page.headers.get('content-security-policy') ?? '';
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    const asset = await fetch(`${base}/assets/app-1.js`);
    assert.match(asset.headers.get('cache-control') ?? '', /immutable/);
    assert.equal((await fetch(`${base}/assets/..%2f..%2fetc%2fpasswd`)).status, 404);
  });

  it('refuses a wrong token with 401, and the API without a session', async () => {
    const wrong = await post('/api/console/session', { token: 'nope', name: 'mallory' }, {});
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers.get('set-cookie'), null);
    assert.equal((await fetch(`${base}/api/console/overview`)).status, 401);
  });

  it('gives an HttpOnly, SameSite=Strict session cookie; no secret in the session answer', async () => {
    const response = await post('/api/console/session', { token, name: 'ada' }, {});
    const cookie = response.headers.get('set-cookie') ?? '';
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    assert.match(cookie, /Max-Age=60/);
    const text = await response.text();
    assert.ok(!text.includes(token), 'the token is not echoed');
    const { cookie: session } = await signIn();
    const overview = await fetch(`${base}/api/console/overview`, { headers: { cookie: session } });
    assert.equal(overview.status, 200);
  });

  it('requires the CSRF token on every change; with it the change happens', async () => {
    const { cookie, csrf } = await signIn();
    const without = await post('/api/console/channels/restart', { name: 'telegram' }, { cookie });
    assert.equal(without.status, 403);
    const wrong = await post('/api/console/channels/restart', { name: 'telegram' }, { cookie, 'x-csrf-token': 'x'.repeat(32) });
    assert.equal(wrong.status, 403);
    assert.deepEqual(changes, [], 'nothing changed without the CSRF token');
    const right = await post('/api/console/channels/restart', { name: 'telegram' }, { cookie, 'x-csrf-token': csrf });
    assert.equal(right.status, 200);
    assert.deepEqual(changes, ['restart telegram']);
  });

  it('refuses a change from another origin even with the CSRF token', async () => {
    const { cookie, csrf } = await signIn();
    const response = await post('/api/console/pairing/deny', { channel: 'telegram', code: 'ABC234' }, { cookie, 'x-csrf-token': csrf, origin: 'https://evil.example' });
    assert.equal(response.status, 403);
    assert.deepEqual(changes, []);
  });

  it('answers bad input with a clear 4xx and changes nothing', async () => {
    const { cookie, csrf } = await signIn();
    const headers = { cookie, 'x-csrf-token': csrf };
    const cases: Array<[string, unknown, number, RegExp]> = [
      ['/api/console/pairing/approve', { channel: 'telegram', code: 42 }, 400, /"code" must be a string/],
      ['/api/console/pairing/approve', { channel: 'telegram' }, 400, /"code" must be a string/],
      ['/api/console/pairing/approve', ['telegram', 'ABC234'], 400, /must be a JSON object/],
      ['/api/console/pairing/approve', '{"channel":', 400, /not valid JSON/],
      ['/api/console/channels/restart', { name: '' }, 400, /must not be empty/],
      ['/api/console/channels/restart', { name: 'x'.repeat(65) }, 400, /longer than 64/],
      ['/api/console/memory/forget', { id: null }, 400, /"id" must be a string/],
      ['/api/console/pairing/approve', { channel: 'telegram', code: 'x'.repeat(2000) }, 413, /larger than 1024 bytes/],
    ];
    for (const [path, body, status, message] of cases) {
      const response = await post(path, body, headers);
      assert.equal(response.status, status, `${path} ${JSON.stringify(body)}`);
      assert.match(((await response.json()) as { error: string }).error, message);
    }
    const form = await fetch(`${base}/api/console/channels/restart`, { method: 'POST', headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' }, body: 'name=telegram' });
    assert.equal(form.status, 415);
    assert.deepEqual(changes, [], 'nothing changed');
    const notFound = await post('/api/console/pairing/approve', { channel: 'telegram', code: 'ZZZ999' }, headers);
    assert.equal(notFound.status, 404);
    assert.equal((await fetch(`${base}/api/console/nope`, { headers: { cookie } })).status, 404);
    assert.equal((await fetch(`${base}/api/console/pairing/approve`, { headers: { cookie } })).status, 405);
  });

  it('takes a chat message with a file as the signed-in operator, and refuses bad or oversized uploads', async () => {
    const { cookie, csrf } = await signIn('ada');
    const headers = { cookie, 'x-csrf-token': csrf };
    const ok = await post('/api/console/chat', { text: 'hi', files: [{ name: 'a.txt', mime: 'text/plain', data: Buffer.from('abc').toString('base64') }] }, headers);
    assert.equal(ok.status, 202);
    assert.deepEqual(posted, ['ada: hi (a.txt 3)']);
    const bad: Array<[unknown, RegExp]> = [
      [{ text: 'x', files: 'a.txt' }, /"files" must be an array/],
      [{ text: 'x', files: [{ name: 'a', data: 'not base64!' }] }, /must be base64/],
      [{ text: 'x', files: [{ name: '', data: '' }] }, /name must be a string/],
      [{ text: '' }, /some text or a file/],
      [{ text: 5 }, /"text" must be a string/],
    ];
    for (const [body, message] of bad) {
      const response = await post('/api/console/chat', body, headers);
      assert.equal(response.status, 400, JSON.stringify(body));
      assert.match(((await response.json()) as { error: string }).error, message);
    }
    const huge = await post('/api/console/chat', { text: 'x', files: [{ name: 'big', data: 'A'.repeat(13 * 1024 * 1024) }] }, headers);
    assert.equal(huge.status, 413);
    assert.deepEqual(posted, ['ada: hi (a.txt 3)'], 'nothing else was posted');
    const bearer = await post('/api/console/chat', { text: 'hi' }, { authorization: `Bearer ${token}` });
    assert.equal(bearer.status, 400, 'the chat needs a person, not a script');
  });

  it('approves a pairing code and denies an approval with a session', async () => {
    pending = [{ channel: 'telegram', senderId: 'alice', code: 'ABC234', createdAt: Date.now() }];
    const { cookie, csrf } = await signIn();
    const access = (await (await fetch(`${base}/api/console/access`, { headers: { cookie } })).json()) as { pending: PendingCode[] };
    assert.equal(access.pending[0]?.code, 'ABC234');
    const approve = await post('/api/console/pairing/approve', { channel: 'telegram', code: 'ABC234' }, { cookie, 'x-csrf-token': csrf });
    assert.deepEqual(await approve.json(), { ok: true, sender: 'alice' });
    const deny = await post('/api/console/approvals/deny', { conversation: 'telegram:bot:1' }, { cookie, 'x-csrf-token': csrf });
    assert.equal(deny.status, 200);
    const again = await post('/api/console/approvals/deny', { conversation: 'telegram:bot:2' }, { cookie, 'x-csrf-token': csrf });
    assert.equal(again.status, 404);
    assert.deepEqual(changes, ['approve telegram ABC234', 'clear telegram:bot:1']);
  });

  it('a bearer token works without a session or CSRF token (scripts)', async () => {
    const response = await post('/api/console/channels/restart', { name: 'telegram' }, { authorization: `Bearer ${token}` });
    assert.equal(response.status, 200);
    assert.equal((await post('/api/console/channels/restart', { name: 'telegram' }, { authorization: 'Bearer wrong' })).status, 401);
  });

  it('ends sessions when the token changes, and on sign-out', async () => {
    const { cookie, csrf } = await signIn();
    currentToken = 'another-token-0123456789abcdef';
    assert.equal((await fetch(`${base}/api/console/overview`, { headers: { cookie } })).status, 401);
    currentToken = token;
    const second = await signIn();
    const out = await fetch(`${base}/api/console/session`, { method: 'DELETE', headers: { cookie: second.cookie, 'x-csrf-token': second.csrf } });
    assert.equal(out.status, 200);
    assert.match(out.headers.get('set-cookie') ?? '', /Max-Age=0/);
    assert.equal((await fetch(`${base}/api/console/overview`, { headers: { cookie: second.cookie } })).status, 401);
    void csrf;
  });

  it('without a token (loopback only): a name signs in, and a foreign Host name is refused', async () => {
    currentToken = undefined;
    const session = await (await fetch(`${base}/api/console/session`)).json();
    assert.deepEqual(session, { signedIn: false, tokenRequired: false });
    const signIn = await post('/api/console/session', { name: 'ada' }, {});
    assert.equal(signIn.status, 200);
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const { port } = new URL(base);
      request({ host: '127.0.0.1', port, path: '/', headers: { host: `rebound.example:${port}` } }, (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    assert.equal(status, 403);
  });

  it('limits failed sign-ins per address (429 with Retry-After), and a right token then waits too', async () => {
    for (let i = 0; i < 5; i++) assert.equal((await post('/api/console/session', { token: `wrong-${i}` }, {})).status, 401);
    const limited = await post('/api/console/session', { token: 'wrong-again' }, {});
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    assert.equal((await post('/api/console/session', { token }, {})).status, 429);
  });
});

describe('console: secrets masked', () => {
  const file = [
    '[provider]',
    'api_key = "sk-literal-secret"',
    'model = "m"',
    '[gateway]',
    'token = "${SWITCHBOARD_TOKEN}"',
    '[[mcp.servers]]',
    'name = "wiki"',
    'headers = { Authorization = "Bearer abc" }',
  ].join('\n');

  it('masks literal secrets, keeps references, and puts secrets back on save', () => {
    const shown = maskText(file);
    assert.ok(!shown.includes('sk-literal-secret'));
    assert.ok(!shown.includes('Bearer abc'));
    assert.match(shown, /token = "\$\{SWITCHBOARD_TOKEN\}"/);
    assert.match(shown, new RegExp(`api_key = ${masked}`));
    const edited = shown.replace('model = "m"', 'model = "n"');
    const { text, missing } = unmaskText(edited, file);
    assert.deepEqual(missing, []);
    assert.equal(text, file.replace('model = "m"', 'model = "n"'));
    assert.deepEqual(unmaskText(`[gateway]\npassword = ${masked}`, file).missing, ['gateway.password']);
  });

  it('masks every secret of the effective config', () => {
    const shown = JSON.stringify(maskObject({ provider: { api_key: 'sk-1', api_keys: ['a', 'b'], max_tokens: 5 }, gateway: { token: 't' }, mcp: { servers: [{ env: { X: 'y' } }] } }));
    for (const secret of ['sk-1', '"a"', '"t"', '"y"']) assert.ok(!shown.includes(secret), secret);
    assert.match(shown, /"max_tokens":5/);
  });
});

describe('console sessions', () => {
  it('expire after their time', async () => {
    const { createAuth } = await import('./auth.ts');
    let now = 1_000_000;
    const auth = createAuth({ token: () => token, sessionMs: 1000, log: pino({ level: 'silent' }), now: () => now });
    const result = auth.signIn(token, 'ada', '127.0.0.1');
    assert.ok(result.ok);
    const request = { headers: { cookie: `sb_session=${result.session.id}` } } as unknown as import('node:http').IncomingMessage;
    assert.equal(auth.session(request)?.operator, 'ada');
    now += 1000;
    assert.equal(auth.session(request), undefined);
  });
});
