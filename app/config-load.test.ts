import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ConfigError, loadConfig, locateConfig, parseConfig } from './config.ts';

const minimal = `
[provider]
kind = "openai"
model = "gpt-4o-mini"
`;

const env = { OPENAI_API_KEY: 'sk-test' };

function problems(text: string, environment: NodeJS.ProcessEnv = env): string {
  try {
    parseConfig(text, 'test.toml', environment);
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
    return error.message;
  }
  assert.fail('config was accepted');
}

describe('config', () => {
  it('fills defaults for a minimal config', () => {
    const config = parseConfig(minimal, 'test.toml', env);
    assert.equal(config.data_dir, './data');
    assert.equal(config.agent.name, 'Switchboard');
    assert.equal(config.agent.history_turns, 50);
    assert.equal(config.agent.max_tool_iterations, 10);
    assert.equal(config.provider.base_url, undefined, 'the default endpoint depends on the kind');
    assert.equal(config.provider.tool_calling, 'auto');
    assert.equal(config.security.autonomy, 'supervised');
    assert.ok(config.tools.enabled.includes('shell'));
    assert.equal(config.runtime.max_in_flight, 0);
    assert.deepEqual(config.channels, {});
  });

  it('reads ${NAME} from the environment and ${file:…} from a file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-cfg-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'key'), 'sk-from-file\n');
    const fromEnv = parseConfig(`${minimal}api_key = "\${OPENAI_API_KEY}"\n`, 't', env);
    assert.equal(fromEnv.provider.api_key, 'sk-test');
    const fromFile = parseConfig(`${minimal}api_key = "\${file:${join(dir, 'key')}}"\n`, 't', env);
    assert.equal(fromFile.provider.api_key, 'sk-from-file');
    const mixed = parseConfig(`${minimal}base_url = "http://\${HOST}:11434/v1"\n`, 't', { HOST: '127.0.0.1' });
    assert.equal(mixed.provider.base_url, 'http://127.0.0.1:11434/v1');
  });

  // Each bad config, and what the error must say: the key's path, what is wrong, a right value.
  const table: Array<{ name: string; toml: string; env?: NodeJS.ProcessEnv; expect: RegExp[] }> = [
    { name: 'not TOML', toml: 'data_dir = ', expect: [/not valid TOML at line 1/] },
    { name: 'missing provider', toml: 'data_dir = "./d"', expect: [/provider: is required but missing/, /e\.g\. \[provider\]/] },
    {
      name: 'missing model',
      toml: '[provider]\nkind = "openai"',
      expect: [/provider\.model: is required but missing/, /e\.g\. \[provider\] model = "gpt-4o-mini"/],
    },
    {
      name: 'wrong type',
      toml: `${minimal}[agent]\nhistory_turns = "fifty"`,
      expect: [/agent\.history_turns: must be a whole number ≥ 0 and ≤ 10000, got "fifty"/, /e\.g\. \[agent\] history_turns = 50/],
    },
    { name: 'out of range', toml: `${minimal}[agent]\nmax_tool_iterations = 0`, expect: [/agent\.max_tool_iterations: must be a whole number ≥ 1/, /max_tool_iterations = 10/] },
    { name: 'fraction for an integer', toml: `${minimal}[runtime]\nmax_in_flight = 2.5`, expect: [/runtime\.max_in_flight: must be a whole number/] },
    { name: 'unknown provider kind', toml: '[provider]\nkind = "opneai"\nmodel = "m"', expect: [/provider\.kind: must be one of "openai", "anthropic", "gemini", got "opneai"/, /kind = "openai"/] },
    { name: 'unknown key with a suggestion', toml: '[provider]\nkind = "openai"\nmodle = "m"', expect: [/provider\.modle: unknown key; did you mean "model"\?/, /provider\.model: is required/] },
    { name: 'unknown top-level section', toml: `${minimal}[agnet]\nname = "x"`, expect: [/agnet: unknown key; did you mean "agent"\?/] },
    { name: 'slack without a mode', toml: `${minimal}[channels.slack]\nbot_token = "xoxb-1"`, expect: [/channels\.slack: needs app_token \(Socket Mode\) or signing_secret \(HTTP events\)/] },
    { name: 'email without allow', toml: `${minimal}[channels.email]\naddress = "b@x.org"\nimap = { host = "h", user = "u", password = "p" }\nsmtp = { host = "h", user = "u", password = "p" }`, expect: [/channels\.email\.allow: is required/] },
    { name: 'bad listen address', toml: `${minimal}[channels.slack]\nbot_token = "t"\nsigning_secret = "s"\nlisten = "3000"`, expect: [/channels\.slack\.listen:/, /127\.0\.0\.1:3000/] },
    { name: 'unknown channel', toml: `${minimal}[channels.telegramm]\ntoken = "x"`, expect: [/channels\.telegramm: unknown key; did you mean "telegram"\? known keys here: terminal, telegram, discord, slack, matrix, irc, email/] },
    {
      name: 'missing secret',
      toml: `${minimal}api_key = "\${OPENAI_API_KEY}"`,
      env: {},
      expect: [/provider\.api_key: environment variable OPENAI_API_KEY is not set/, /export OPENAI_API_KEY=/],
    },
    { name: 'unreadable secret file', toml: `${minimal}api_key = "\${file:/nonexistent/key}"`, expect: [/provider\.api_key: secret file \/nonexistent\/key cannot be read \(ENOENT\)/] },
    { name: 'bad reference', toml: `${minimal}api_key = "\${not valid}"`, expect: [/"\$\{not valid\}" is not a valid reference/] },
    { name: 'not a URL', toml: `${minimal}base_url = "api.openai.com"`, expect: [/provider\.base_url: must be an http:\/\/ or https:\/\/ URL, got "api\.openai\.com"/] },
    { name: 'section given a value', toml: `${minimal}[runtime]\ndurability = "sometimes"`, expect: [/runtime\.durability: must be one of "normal", "full"/] },
    { name: 'table where a value belongs', toml: `data_dir = { a = 1 }\n${minimal}`, expect: [/data_dir: must be a non-empty string, got a table/] },
    { name: 'unknown tool', toml: `${minimal}[tools]\nenabled = ["shell", "teleport"]`, expect: [/tools\.enabled\.1: must be one of "current_time", "shell"/] },
    { name: 'bad fallback', toml: `${minimal}[[provider.fallbacks]]\nkind = "anthropic"`, expect: [/provider\.fallbacks\.0\.model: is required but missing/, /model = "gpt-4o-mini"/] },
    { name: 'bad route', toml: `${minimal}[[routes]]\nhint = "fast"\nmodel = 5`, expect: [/routes\.0\.model: must be a non-empty string, got 5/] },
    { name: 'bad autonomy', toml: `${minimal}[security]\nautonomy = "yolo"`, expect: [/security\.autonomy: must be one of "read_only", "supervised", "full"/] },
    { name: 'sub-agent without description', toml: `${minimal}[agents.research]\ntools = ["web_fetch"]`, expect: [/agents\.research\.description: is required but missing/] },
    {
      name: 'telegram webhook secret Telegram refuses (base64)',
      toml: `${minimal}[channels.telegram]\ntoken = "1:a"\nwebhook = { url = "https://bot.example.org/tg", secret = "\${TG_SECRET}" }`,
      env: { ...env, TG_SECRET: 'q83vEjRWeJA+/w==' },
      expect: [/channels\.telegram\.webhook\.secret: Telegram takes 1–256 characters of A-Z, a-z, 0-9, _ and - only/],
    },
    {
      name: 'telegram webhook secret over 256 characters',
      toml: `${minimal}[channels.telegram]\ntoken = "1:a"\nwebhook = { url = "https://bot.example.org/tg", secret = "${'a'.repeat(257)}" }`,
      expect: [/channels\.telegram\.webhook\.secret: Telegram takes 1–256 characters/],
    },
    { name: 'bad log level', toml: `${minimal}[log]\nlevel = "loud"`, expect: [/log\.level: must be one of "trace", "debug", "info"/] },
  ];

  for (const row of table) {
    it(`rejects: ${row.name}`, () => {
      const message = problems(row.toml, row.env ?? env);
      for (const pattern of row.expect) assert.match(message, pattern);
      assert.match(message, /^Config error in test\.toml:/);
      assert.match(message, /Nothing was started/);
    });
  }

  it('never quotes a webhook secret it refuses, and takes one Telegram accepts', () => {
    const toml = (secret: string): string => `${minimal}[channels.telegram]\ntoken = "1:a"\nwebhook = { url = "https://bot.example.org/tg", secret = "${secret}" }`;
    assert.doesNotMatch(problems(toml('q83vEjRWeJA+/w==')), /q83vEjRWeJA/);
    assert.equal(parseConfig(toml('A-z_09'.repeat(40)), 't', env).channels.telegram?.webhook?.secret, 'A-z_09'.repeat(40));
    // operator commands that need no secrets leave the reference as it is
    assert.equal(parseConfig(toml('$' + '{TG_SECRET}'), 't', env, { requireSecrets: false }).channels.telegram?.webhook?.secret, '${TG_SECRET}');
  });

  it('[transcription]: off when absent; defaults, ${ENV} key and clear errors when present', () => {
    assert.equal(parseConfig(minimal, 't', env).transcription, undefined);
    const on = parseConfig(`${minimal}[transcription]\nkind = "openai"\napi_key = "\${WHISPER_KEY}"\nlanguage = "de"\n`, 't', { ...env, WHISPER_KEY: 'sk-whisper' });
    assert.deepEqual(on.transcription, {
      kind: 'openai',
      base_url: 'https://api.openai.com/v1',
      model: 'whisper-1',
      api_key: 'sk-whisper',
      language: 'de',
      timeout_seconds: 120,
      max_retries: 2,
      retry_max_wait_seconds: 30,
      echo_transcript: false,
      max_audio_mb: 25,
    });
    const message = problems(`${minimal}[transcription]\nkind = "whisper"\nbase_url = "localhost:9000"\nlanguage = "German"\necho_transcript = "yes"\nmax_audio_mb = 0\nbogus = 1\n`);
    assert.match(message, /transcription\.kind: .*e\.g\. \[transcription\] kind = "openai"/s);
    assert.match(message, /transcription\.base_url: must be an http:\/\/ or https:\/\/ URL/);
    assert.match(message, /transcription\.language: must be an ISO-639-1 language code such as "en" or "de"/);
    assert.match(message, /transcription\.echo_transcript/);
    assert.match(message, /transcription\.max_audio_mb/);
    assert.match(message, /transcription\.bogus/);
    assert.match(problems(`${minimal}[transcription]\nkind = "openai"\napi_key = "\${WHISPER_KEY}"\n`), /transcription\.api_key: .*WHISPER_KEY/);
  });

  it('reports every problem at once', () => {
    const message = problems('[provider]\nkind = "x"\n[agent]\nhistory_turns = -1\nbogus = 1');
    assert.match(message, /provider\.kind/);
    assert.match(message, /provider\.model/);
    assert.match(message, /agent\.history_turns/);
    assert.match(message, /agent\.bogus/);
  });

  it('looks for the config in the documented order', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-locate-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const home = join(dir, 'home');
    mkdirSync(join(home, '.config/switchboard'), { recursive: true });
    writeFileSync(join(home, '.config/switchboard/config.toml'), minimal);
    assert.equal(locateConfig({ flag: 'x.toml', env: { SWITCHBOARD_CONFIG: 'y.toml' }, cwd: dir, home }), join(dir, 'x.toml'));
    assert.equal(locateConfig({ env: { SWITCHBOARD_CONFIG: 'y.toml' }, cwd: dir, home }), join(dir, 'y.toml'));
    assert.equal(locateConfig({ env: {}, cwd: dir, home }), join(home, '.config/switchboard/config.toml'));
    writeFileSync(join(dir, 'switchboard.toml'), minimal);
    assert.equal(locateConfig({ env: {}, cwd: dir, home }), join(dir, 'switchboard.toml'));
    assert.throws(() => locateConfig({ env: {}, cwd: join(dir, 'home'), home: join(dir, 'nowhere') }), /no config file found/);
    assert.throws(() => loadConfig(join(dir, 'missing.toml')), /the file does not exist/);
  });
});
