/**
 * Masking the config by TOML path: a secret is hidden however the file writes it (inline
 * tables, arrays over several lines, dotted and quoted keys, multi-line strings, a password in
 * a URL), put back only at the path it came from, and a mark anywhere else is refused with the
 * path named and no value. The request-level property (nothing secret in any answer of the
 * Config page) is test/console-config-secrets.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'smol-toml';
import { mark, masked, maskObject, maskText, unmaskText } from './mask.ts';
import { tomlStrings } from './toml-strings.ts';

const file = `# Switchboard
data_dir = "./data"
provider.api_key = "sk-dotted-0001"
[provider.fallback]
"api_key" = 'sk-quoted-0002'
api_keys = [
  "sk-array-0003",   # first
  '\${OPENAI_KEY_2}',
  """sk-array-0004""",
]
[store]
kind = "postgres"
url = "postgres://switchboard:pg-pass-0005@db.internal:5432/sb"
[channels.irc]
sasl = { user = "switchboard", password = "sasl-pass-0006" }
[channels.email]
imap = { host = "mail", port = 993, tls = true, user = "bot", password = "imap-pass-0007" }
[gateway]
token = "\${SWITCHBOARD_TOKEN}"
[agent]
instructions = """
Be brief.
token = "not-a-secret-line"
"""
[[mcp.servers]]
name = "wiki"
url = "https://mcp:mcp-pass-0008@wiki.example/mcp?access_token=mcp-token-0009&page=1"
headers = { Authorization = "Bearer hdr-0010" }
[[mcp.servers]]
name = "files"
command = "npx"
env.FILES_TOKEN = '''files-0011'''
[mcp.servers.headers]
"X-Api-Key" = "hdr-0012"
`;
const secrets = Array.from(file.matchAll(/[a-z]+(?:-[a-z]+)*-\d{4}/g), (m) => m[0]);

describe('console: secrets masked by TOML path', () => {
  it('finds every string with its path, whatever the form', () => {
    const paths = tomlStrings(file).map(({ path }) => path.join('.'));
    assert.deepEqual(paths, [
      'data_dir',
      'provider.api_key',
      'provider.fallback.api_key',
      'provider.fallback.api_keys.0',
      'provider.fallback.api_keys.1',
      'provider.fallback.api_keys.2',
      'store.kind',
      'store.url',
      'channels.irc.sasl.user',
      'channels.irc.sasl.password',
      'channels.email.imap.host',
      'channels.email.imap.user',
      'channels.email.imap.password',
      'gateway.token',
      'agent.instructions',
      'mcp.servers.0.name',
      'mcp.servers.0.url',
      'mcp.servers.0.headers.Authorization',
      'mcp.servers.1.name',
      'mcp.servers.1.command',
      'mcp.servers.1.env.FILES_TOKEN',
      'mcp.servers.1.headers.X-Api-Key',
    ]);
  });

  it('hides every secret and keeps references, comments and the rest as written', () => {
    assert.equal(secrets.length, 12);
    const shown = maskText(file);
    for (const secret of secrets) assert.ok(!shown.includes(secret), `${secret} is hidden`);
    assert.match(shown, /'\$\{OPENAI_KEY_2\}'/);
    assert.match(shown, /token = "\$\{SWITCHBOARD_TOKEN\}"/);
    assert.match(shown, /url = "postgres:\/\/switchboard:••••••••@db\.internal:5432\/sb"/);
    assert.match(shown, /"https:\/\/mcp:••••••••@wiki\.example\/mcp\?access_token=••••••••&page=1"/);
    assert.match(shown, /token = "not-a-secret-line"/, 'a line inside a multi-line string is text, not a key');
    assert.ok(shown.includes(`"${mark}",   # first`));
    assert.equal(shown.split('\n').length, file.split('\n').length);
  });

  it('puts every secret back by path: saving what it showed gives the file back byte for byte', () => {
    const { text, problems } = unmaskText(maskText(file), file);
    assert.deepEqual(problems, []);
    assert.equal(text, file);
  });

  it('keeps a secret through a change of form (an inline table made a table, a URL’s host changed)', () => {
    const shown = maskText(file).replace(`sasl = { user = "switchboard", password = ${masked} }\n`, '').replace('@db.internal:', '@db2.internal:') + `[channels.irc.sasl]\nuser = "switchboard"\npassword = ${masked}\n`;
    const { text, problems } = unmaskText(shown, file);
    assert.deepEqual(problems, []);
    const saved = parse(text) as { store: { url: string }; channels: { irc: { sasl: { password: string } } } };
    assert.equal(saved.store.url, 'postgres://switchboard:pg-pass-0005@db2.internal:5432/sb');
    assert.equal(saved.channels.irc.sasl.password, 'sasl-pass-0006');
  });

  it('refuses a mark placed anywhere else, naming the path and never a value', () => {
    const shown = maskText(file);
    const cases: Array<[string, RegExp]> = [
      // The mark inside a multi-line string (once put back line by line, then echoed by a validation error).
      [shown.replace('Be brief.', `Be brief.\ntoken = ${mark}`), /^agent\.instructions: "••••••••" stands for a secret saved at this very key/],
      [shown.replace('data_dir = "./data"', `data_dir = "${mark}"`), /^data_dir: /],
      [shown.replace('name = "wiki"', 'name = "wiki"\nextra_token = "••••••••"'), /^mcp\.servers\[0\]\.extra_token: a masked secret with no saved value/],
      [shown.replace('headers = { Authorization = "••••••••" }', 'headers = { Authorization = "Bearer ••••••••" }'), /^mcp\.servers\[0\]\.headers\.Authorization: /],
      [`${shown}[extra]\n"${mark}" = 1\n`, /^extra: a key holds/],
    ];
    for (const [edited, problem] of cases) {
      const { problems } = unmaskText(edited, file);
      assert.equal(problems.length, 1, `${problem}: ${problems.join(' | ')}`);
      assert.match(problems[0]!, problem);
      for (const secret of secrets) assert.ok(!problems[0]!.includes(secret));
    }
  });

  it('does not give one server’s secret to another when the servers change places', () => {
    const two = '[[mcp.servers]]\nname = "a"\nurl = "http://a/"\nheaders = { Authorization = "Bearer for-a-0014" }\n[[mcp.servers]]\nname = "b"\nurl = "http://b/"\nheaders = { Authorization = "Bearer for-b-0015" }\n';
    const [, first, second] = /^([\s\S]*?)(\[\[mcp\.servers\]\]\nname = "b"[\s\S]*)$/.exec(maskText(two))!;
    const { problems } = unmaskText(`${second}${first}`, two);
    assert.deepEqual(problems.map((problem) => problem.split(':')[0]), ['mcp.servers[0].headers.Authorization', 'mcp.servers[1].headers.Authorization']);
  });

  it('masks the effective config by path, URL passwords included', () => {
    const effective = JSON.stringify(maskObject({ ...(parse(file) as object), gateway: { token: 'resolved-token-0013' } }));
    for (const secret of [...secrets, 'resolved-token-0013']) assert.ok(!effective.includes(secret), secret);
    assert.match(effective, /"url":"postgres:\/\/switchboard:••••••••@db\.internal:5432\/sb"/);
    assert.match(effective, /"kind":"postgres"/);
  });

  it('will not show a file that is not TOML', () => {
    assert.throws(() => maskText('token = "abc\n'), { name: 'UnshowableConfig', message: /not valid TOML \(line 1/ });
  });
});
