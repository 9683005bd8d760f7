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
import type { LogTail } from '../log.ts';
import { until } from '../../test/support/wait.ts';
import { maskText, unmaskText, maskObject, masked } from './mask.ts';
import { fakeConsoleDeps } from '../../test/support/console-deps.ts';

const token = 'console-test-token-0123456789';

describe('console API', () => {
  let server: Server;
  let base: string;
  let dir: string;
  let currentToken: string | undefined = token;
  const changes: string[] = [];
  let pending: PendingCode[] = [];
  const posted: string[] = [];
  const clientIds: Array<string | undefined> = [];

  const queries: ConsoleQueries = {
    conversations: async () => [],
    search: async () => [],
    transcript: async () => [],
    chat: async () => [],
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
        post: async (operator, text, files, clientId) => {
          clientIds.push(clientId);
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

  it('puts the security headers on every answer: the page, the API, errors', async () => {
    const { cookie } = await signIn();
    const answers = [await fetch(`${base}/`), await fetch(`${base}/api/console/overview`, { headers: { cookie } }), await fetch(`${base}/api/console/overview`), await fetch(`${base}/nope`), await post('/api/console/channels/restart', {}, { cookie })];
    for (const answer of answers) {
      assert.match(answer.headers.get('content-security-policy') ?? '', /^default-src 'self'; script-src 'self';.*object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'$/, answer.url);
      assert.equal(answer.headers.get('x-frame-options'), 'DENY');
      assert.equal(answer.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(answer.headers.get('referrer-policy'), 'no-referrer');
      assert.equal(answer.headers.get('cross-origin-opener-policy'), 'same-origin');
      assert.equal(answer.headers.get('cross-origin-resource-policy'), 'same-origin');
    }
  });

  it('serves only the built files: no way out of the static folder', async () => {
    const { request } = await import('node:http');
    // Raw paths (fetch would normalise the dots away before they reach the server).
    const raw = (path: string): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        request({ host: '127.0.0.1', port: new URL(base).port, path }, (response) => {
          let body = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (body += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
        })
          .on('error', reject)
          .end();
      });
    const built = ['<!doctype html><title>console</title>', 'export {}'];
    for (const path of ['/assets/..', '/assets/../index.html', '/assets/..%2findex.html', '/assets/%2e%2e%2f%2e%2e%2fetc%2fpasswd', '/../../etc/passwd', '/assets/app-1.js/..', '/assets//etc/passwd', '/assets/.%2e/x', '/index.html/../../x', '/server.ts', '/assets/%2e%2e', '/assets/..%5c..%5cetc%5cpasswd']) {
      const { status, body } = await raw(path);
      // (dots that URL rules resolve, "/assets/.." being "/", may serve a built file; nothing else)
      assert.ok(status === 404 || status === 400 || (status === 200 && built.includes(body)), `${path}: ${status} ${body.slice(0, 80)}`);
    }
    assert.equal((await raw('/assets/app-1.js')).status, 200);
  });

  it('marks the cookie Secure over TLS (a proxy’s X-Forwarded-Proto: https), not over plain HTTP', async () => {
    const plain = await post('/api/console/session', { token, name: 'ada' }, {});
    assert.doesNotMatch(plain.headers.get('set-cookie') ?? '', /Secure/);
    const tls = await post('/api/console/session', { token, name: 'ada' }, { 'x-forwarded-proto': 'https' });
    assert.match(tls.headers.get('set-cookie') ?? '', /; HttpOnly; SameSite=Strict; Max-Age=60; Secure$/);
  });

  it('refuses a sign-out without the CSRF token, and a change from another origin without one', async () => {
    const { cookie } = await signIn();
    assert.equal((await fetch(`${base}/api/console/session`, { method: 'DELETE', headers: { cookie } })).status, 403);
    assert.equal((await fetch(`${base}/api/console/overview`, { headers: { cookie } })).status, 200, 'still signed in');
    const foreign = await post('/api/console/channels/restart', { name: 'telegram' }, { cookie, origin: 'http://127.0.0.1.evil.example' });
    assert.equal(foreign.status, 403);
    assert.deepEqual(changes, []);
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
    // a sandboxed frame or a file: page says Origin: null — foreign too
    const sandboxed = await post('/api/console/pairing/deny', { channel: 'telegram', code: 'ABC234' }, { cookie, 'x-csrf-token': csrf, origin: 'null' });
    assert.equal(sandboxed.status, 403);
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
      [{ text: 'x', id: 'short' }, /id must be 8 to 64/],
      [{ text: 'x', id: 'has spaces in it' }, /id must be 8 to 64/],
      [{ text: 'x', id: 12345678 }, /id must be 8 to 64/],
    ];
    for (const [body, message] of bad) {
      const response = await post('/api/console/chat', body, headers);
      assert.equal(response.status, 400, JSON.stringify(body));
      assert.match(((await response.json()) as { error: string }).error, message);
    }
    const huge = await post('/api/console/chat', { text: 'x', files: [{ name: 'big', data: 'A'.repeat(13 * 1024 * 1024) }] }, headers);
    assert.equal(huge.status, 413);
    assert.deepEqual(posted, ['ada: hi (a.txt 3)'], 'nothing else was posted');
    assert.equal((await post('/api/console/chat', { text: 'again', id: 'page_id-0001' }, headers)).status, 202);
    assert.deepEqual(clientIds, [undefined, 'page_id-0001'], 'the page’s own id reaches the channel');
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
    const { text, problems } = unmaskText(edited, file);
    assert.deepEqual(problems, []);
    assert.equal(text, file.replace('model = "m"', 'model = "n"'));
    assert.match(unmaskText(`[gateway]\npassword = ${masked}`, file).problems.join('\n'), /^gateway\.password: a masked secret with no saved value/);
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
    const found = auth.session(request, '127.0.0.1');
    assert.equal(found?.ok && found.session.operator, 'ada');
    now += 1000;
    assert.equal(auth.session(request, '127.0.0.1'), undefined);
  });
});

/** A console of its own on loopback (its own sign-in limit), with a log tail and the log's lines kept. */
async function serve(overrides: Partial<ConsoleDeps> = {}): Promise<{ base: string; tail: LogTail; logged: () => Array<Record<string, unknown>>; close(): Promise<void> }> {
  const { createLogTail } = await import('../log.ts');
  const tail = createLogTail();
  const lines: string[] = [];
  const deps = fakeConsoleDeps(token, { log: pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }), restartChannel: () => true, logs: tail, ...overrides });
  const handler = createConsole(deps);
  const server = createServer((request, response) => void handler(request, response));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    tail,
    logged: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

const signInAt = async (base: string, headers: Record<string, string> = {}, given = token): Promise<Response> =>
  fetch(`${base}/api/console/session`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ token: given, name: 'ada' }) });

describe('console: one sign-in limit for every way of presenting the token', () => {
  it('counts and logs wrong bearer tokens like wrong sign-ins, and refuses even the right one during the lockout', async () => {
    const site = await serve();
    try {
      const overview = (bearer: string): Promise<Response> => fetch(`${site.base}/api/console/overview`, { headers: { authorization: `Bearer ${bearer}` } });
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await overview(`wrong-${i}`)).status);
      assert.deepEqual(statuses.slice(0, 5), [401, 401, 401, 401, 401]);
      assert.deepEqual(new Set(statuses.slice(5)), new Set([429]), `after five wrong tokens: ${statuses.join(' ')}`);
      const locked = await overview(token);
      assert.equal(locked.status, 429, 'the right bearer token waits out the lockout too');
      assert.ok(Number(locked.headers.get('retry-after')) >= 1);
      assert.equal((await signInAt(site.base)).status, 429, 'and so does the sign-in form');
      const failed = site.logged().filter((line) => line.msg === 'wrong token presented');
      assert.equal(failed.length, 5);
      assert.ok(failed.every((line) => line.via === 'bearer' && line.address === '127.0.0.1'));
      assert.ok(site.logged().some((line) => /too many failed attempts/.test(String(line.msg)) && line.via === 'bearer'));
    } finally {
      await site.close();
    }
  });

  it('counts wrong sign-ins against later bearer tokens (one limit)', async () => {
    const site = await serve();
    try {
      for (let i = 0; i < 5; i++) assert.equal((await signInAt(site.base, {}, `wrong-${i}`)).status, 401);
      assert.equal((await fetch(`${site.base}/api/console/overview`, { headers: { authorization: 'Bearer wrong' } })).status, 429);
    } finally {
      await site.close();
    }
  });
});

describe('console: the client address behind a reverse proxy', () => {
  it('without trusted proxies ignores X-Forwarded-For: one address, one limit', async () => {
    const site = await serve();
    try {
      for (let i = 0; i < 5; i++) assert.equal((await signInAt(site.base, { 'x-forwarded-for': `203.0.113.${i}` }, 'wrong')).status, 401);
      assert.equal((await signInAt(site.base, { 'x-forwarded-for': '203.0.113.99' })).status, 429, 'a forwarded header from an untrusted peer changes nothing');
    } finally {
      await site.close();
    }
  });

  it('behind a trusted proxy, five bad tries lock out that client, not everyone', async () => {
    const site = await serve({ trustedProxies: ['127.0.0.1', '::1'] });
    try {
      for (let i = 0; i < 5; i++) assert.equal((await signInAt(site.base, { 'x-forwarded-for': '203.0.113.5' }, 'wrong')).status, 401);
      assert.equal((await signInAt(site.base, { 'x-forwarded-for': '203.0.113.5' })).status, 429, 'the guessing client is locked out');
      // What the client wrote on the left is not believed: the proxy appended the address it saw.
      assert.equal((await signInAt(site.base, { 'x-forwarded-for': '198.51.100.7, 203.0.113.5' })).status, 429);
      assert.equal((await signInAt(site.base, { 'x-forwarded-for': '203.0.113.6' })).status, 200, 'another client signs in');
      const failed = site.logged().filter((line) => line.msg === 'wrong token presented');
      assert.ok(failed.every((line) => line.address === '203.0.113.5'), 'the log names the client, not the proxy');
    } finally {
      await site.close();
    }
  });

  it('reads the nearest untrusted hop, and refuses a setting that is no address', async () => {
    const { clientAddress, trustedProxies } = await import('../http/token-guard.ts');
    const request = (peer: string, forwarded?: string): import('node:http').IncomingMessage =>
      ({ socket: { remoteAddress: peer }, headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded } }) as unknown as import('node:http').IncomingMessage;
    const proxies = trustedProxies(['10.0.0.0/8', '127.0.0.1']);
    assert.equal(clientAddress(request('::ffff:127.0.0.1', '192.0.2.1, 10.1.2.3')), '127.0.0.1', 'no trusted proxies: the socket');
    assert.equal(clientAddress(request('::ffff:127.0.0.1', '192.0.2.1, 10.1.2.3'), proxies), '192.0.2.1');
    assert.equal(clientAddress(request('127.0.0.1', 'spoofed, 192.0.2.9'), proxies), '192.0.2.9');
    assert.equal(clientAddress(request('127.0.0.1', 'not-an-address'), proxies), '127.0.0.1');
    assert.equal(clientAddress(request('127.0.0.1'), proxies), '127.0.0.1');
    assert.equal(clientAddress(request('192.0.2.50', '10.9.9.9'), proxies), '192.0.2.50', 'an untrusted peer: its own address');
    assert.throws(() => trustedProxies(['localhost']), /"localhost" is not an IP address or CIDR range/);
  });
});

/** Reads an event stream: its text so far, and whether the server ended it. */
function readStream(response: Response): { text: () => string; ended: Promise<void> } {
  let text = '';
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const ended = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { text: () => text, ended };
}

const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} (not within ${ms} ms)`)), ms).unref())]);

describe('console: an event stream lives no longer than its session', () => {
  const logLine = (msg: string): string => `${JSON.stringify({ level: 30, time: Date.now(), msg })}\n`;

  it('closes at sign-out, and no log line reaches it after', async () => {
    const site = await serve();
    try {
      const signedIn = await signInAt(site.base);
      const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0]!;
      const { csrf } = (await signedIn.json()) as { csrf: string };
      const stream = readStream(await fetch(`${site.base}/api/console/stream?logs=1`, { headers: { cookie } }));
      await until(() => stream.text().includes('event: overview'), 'the first overview');
      site.tail.write(logLine('before sign-out'));
      await until(() => stream.text().includes('before sign-out'), 'the live log line');
      assert.equal((await fetch(`${site.base}/api/console/session`, { method: 'DELETE', headers: { cookie, 'x-csrf-token': csrf } })).status, 200);
      site.tail.write(logLine('after sign-out'));
      await within(stream.ended, 3000, 'the stream is still open after sign-out');
      assert.ok(!stream.text().includes('after sign-out'), 'no log line after sign-out');
    } finally {
      await site.close();
    }
  });

  it('closes at expiry, and no log line reaches it after', async () => {
    const site = await serve({ sessionMs: 1500 });
    try {
      const signedIn = await signInAt(site.base);
      const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0]!;
      const stream = readStream(await fetch(`${site.base}/api/console/stream?logs=1`, { headers: { cookie } }));
      await until(() => stream.text().includes('event: overview'), 'the first overview');
      await new Promise((resolve) => setTimeout(resolve, 1700));
      site.tail.write(logLine('after expiry'));
      await within(stream.ended, 3000, 'the stream is still open after the session expired');
      assert.ok(!stream.text().includes('after expiry'), 'no log line after expiry');
    } finally {
      await site.close();
    }
  });
});
