/**
 * The Config page never hands out a secret (fast-check, on loopback): configs are generated
 * with secrets in every form TOML has — tables, dotted and quoted keys, inline tables, arrays
 * over several lines with comments, the four kinds of string, `env` and `headers` tables, a
 * password and a token in a URL — and the console's answers to reading the config (the text
 * and the effective config), validating and saving it (what it showed, with the masked mark
 * moved into a multi-line string or another key, and with a mistake that makes validation
 * quote values) hold none of them.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { parse } from 'smol-toml';
import { configPort } from '../app/console.ts';
import type { Config } from '../src/config/schema.ts';
import { unmaskText } from '../src/console/mask.ts';
import { createConsole } from '../src/console/server.ts';
import { fuzzAsync } from './support/fuzz.ts';
import { fakeConsoleDeps } from './support/console-deps.ts';

const token = 'console-config-token-0123456789';
const mark = '••••••••';

/** A secret: long and random enough never to appear by chance; URL-safe where it sits in a URL. */
const secret = fc.stringMatching(/^[A-Za-z0-9]{6,16}$/).map((tail) => `S3cr${tail}`);

/** One way of writing a secret (or two) into the file: [TOML lines, the secrets in them]. */
type Form = [string, string[]];
const one = (lines: (s: string) => string): fc.Arbitrary<Form> => secret.map((s): Form => [lines(s), [s]]);
const two = (lines: (a: string, b: string) => string): fc.Arbitrary<Form> => fc.tuple(secret, secret).map(([a, b]): Form => [lines(a, b), [a, b]]);
const form: fc.Arbitrary<Form> = fc.oneof(
  one((s) => `[provider]\napi_key = "${s}"`),
  one((s) => `provider.api_key = '${s}'`),
  one((s) => `[channels.telegram]\n"bot_token" = "${s}"`),
  one((s) => `[channels.slack]\n'signing_secret' = """${s}"""`),
  one((s) => `[channels.irc]\nsasl = { user = "bot", password = "${s}" }`),
  one((s) => `[channels.email]\nimap = { host = "mail", port = 993, user = "bot", password = '''${s}''' }`),
  two((a, b) => `[provider.fallback]\napi_keys = [\n  "${a}", # the first\n  '\${KEY_2}',\n  """\n${b}""",\n]`),
  one((s) => `[gateway]\ntoken = """\\\n  ${s}\\\n  """`),
  one((s) => `[store]\nkind = "postgres"\nurl = "postgres://switchboard:${s}@db.internal:5432/sb"`),
  two((a, b) => `[[mcp.servers]]\nname = "wiki"\nurl = "https://mcp:${a}@wiki.example/mcp?access_token=${b}"`),
  // (not an http URL: validation quotes the value it refuses)
  one((s) => `[[mcp.servers]]\nname = "ftp"\nurl = "ftp://u:${s}@files.example/"`),
  one((s) => `[[mcp.servers]]\nname = "files"\ncommand = "npx"\nenv = { FILES_TOKEN = "${s}" }`),
  one((s) => `[[mcp.servers]]\nname = "web"\nurl = "http://127.0.0.1:9000/mcp"\n[mcp.servers.headers]\nAuthorization = "Bearer ${s}"`),
  one((s) => `[memory.embedding]\n"api_key" = "\\u0053${s.slice(1)}"`),
  one((s) => `channels.matrix.access_token = "${s}"`),
  one((s) => `[channels.discord]\nauth = { bot_token = "${s}" }`),
);

/** Forms whose tables do not collide (each table defined once), joined into a file. */
const config = fc.uniqueArray(form, { minLength: 1, maxLength: 6, selector: ([lines]) => /^\[*([^\]\n=]+?)[\].= ]/.exec(lines)?.[1] }).map((forms) => {
  const text = `data_dir = "./data"\n[agent]\nname = "Bot"\ninstructions = """\nBe brief.\n"""\n${forms.map(([lines]) => lines).join('\n')}\n`;
  return { text, secrets: forms.flatMap(([, secrets]) => secrets) };
});

describe('the Config page hands out no secret (property, loopback)', () => {
  let dir: string;
  let file: string;
  let server: Server;
  let base: string;
  let headers: Record<string, string>;
  let current: Config;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sb-config-secrets-'));
    file = join(dir, 'switchboard.toml');
    const deps = fakeConsoleDeps(token, {
      staticDir: dir,
      // The effective config: the file as parsed (the daemon's has references resolved; the secrets are the same).
      config: configPort({ file, current: () => current, reload: async () => ({ ok: true, restarted: [], added: [], removed: [], agentRebuilt: false, needsRestart: [] }) }),
    });
    const handler = createConsole(deps);
    server = createServer((request, response) => void handler(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const signIn = await fetch(`${base}/api/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token, name: 'ada' }) });
    const { csrf } = (await signIn.json()) as { csrf: string };
    headers = { cookie: (signIn.headers.get('set-cookie') ?? '').split(';')[0]!, 'x-csrf-token': csrf, 'content-type': 'application/json' };
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('will not show a file on disk that is not TOML (422, the line named, nothing of it quoted)', async () => {
    writeFileSync(file, 'data_dir = "./data"\n[provider]\napi_key = "S3crUnclosed0001\n');
    const response = await fetch(`${base}/api/console/config`, { headers });
    assert.equal(response.status, 422);
    const { error } = (await response.json()) as { error: string };
    assert.match(error, /^the config file is not valid TOML \(line 3, column \d+\); fix it on disk .* it is not shown here, so that no secret in it reaches the page$/);
    assert.ok(!error.includes('S3crUnclosed0001'));
  });

  it('no secret in the config read, validate or save answers, for secrets in every TOML form', async (t) => {
    await fuzzAsync(
      t,
      'config page secrets',
      config,
      async ({ text, secrets }) => {
        writeFileSync(file, text);
        current = parse(text) as unknown as Config;
        const answers: string[] = [];
        const read = await fetch(`${base}/api/console/config`, { headers });
        const body = await read.text();
        answers.push(body);
        assert.equal(read.status, 200, body);
        const shown = (JSON.parse(body) as { text: string }).text;
        // What it showed, sent back unchanged, is the file again, byte for byte.
        assert.deepEqual(unmaskText(shown, text), { text, problems: [] });
        const edits = [
          shown,
          // The mark moved into a multi-line string, beside a line that looks like a key.
          shown.replace('Be brief.', `Be brief.\ntoken = "${mark}"\napi_key = ${mark}`),
          // The mark under a key that held no secret, and a mistake that makes validation quote values.
          shown.replace('name = "Bot"', `name = "${mark}"\nhistory_turns = "many"`),
          // Every mark moved to the end of its line's string, and a secret-holding key of the wrong type.
          shown.replaceAll(`"${mark}"`, `"x${mark}"`).replace('data_dir = "./data"', 'data_dir = 5'),
        ];
        for (const edited of edits) {
          for (const action of ['validate', 'save']) {
            writeFileSync(file, text);
            const response = await fetch(`${base}/api/console/config/${action}`, { method: 'POST', headers, body: JSON.stringify({ text: edited }) });
            answers.push(await response.text());
            assert.ok(response.status === 200 || response.status === 422, `${action}: ${response.status}`);
          }
        }
        for (const answer of answers) for (const s of secrets) assert.ok(!answer.includes(s), `the secret ${s} is in an answer: ${answer.slice(0, 2000)}`);
      },
      { runs: 100 },
    );
  });
});
