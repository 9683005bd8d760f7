/**
 * `switchboard onboard`: a few questions (provider, model, key, channels with what each
 * needs, the gateway), one real call to check the key, then a commented config file.
 * Secrets are never written into the file: it reads them as "${NAME}", and the answer tells
 * where to put them. The key is typed hidden at a terminal. An existing config is kept as
 * `.bak` first. Answers come from any stream, so tests script them.
 */
import { chmodSync, copyFileSync, existsSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError, parseConfig } from './config.ts';
import { isLoopback } from '../src/gateway/server.ts';
import { parseListen } from '../src/net.ts';
import { makeDirectory } from '../src/store/files.ts';
import { checkEndpoint } from './doctor-remote.ts';
import { chatProbe } from './doctor.ts';
import { switchboardCommand } from './invocation.ts';
import { askChannel, channelNames, envName, field, type ChannelAnswers, type ChannelName, type Secret } from './onboard-channels.ts';
import { createPrompt, InputEndedError, InterruptedError, type Prompt } from './prompt.ts';

export const onboardUsage = `Usage: switchboard onboard [--config FILE]

Asks for the model provider, its URL, the model and the API key (typed hidden; checked with
one real call and never written: the file reads it as \${NAME}), the channels — any of
${channelNames.join(', ')} — with what each needs and who may talk
(allow), and the HTTP gateway that switchboard status and reload use. Then writes a
commented config, mode 0600, to FILE (default: $SWITCHBOARD_CONFIG or ./switchboard.toml);
an existing one is kept as FILE.bak.

Options:
  -c, --config FILE   where to write the config
  -h, --help          show this help

Exit codes: 0 written, 1 the key check failed and you chose not to write, 2 the answers ran
out or a usage error, 130 interrupted.
`;

export interface OnboardIo {
  readonly stdin: NodeJS.ReadableStream;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: NodeJS.ProcessEnv;
  /** Where to write. @default $SWITCHBOARD_CONFIG or ./switchboard.toml */
  readonly configFlag?: string;
  /** @default process.cwd() */
  readonly cwd?: string;
  /** Deadline of the key check. @default 15000 */
  readonly timeoutMs?: number;
  /** The package root, for how to write the command in "Next:". @default this install */
  readonly installRoot?: string;
}

const PROVIDERS = {
  openai: { kind: 'openai', base: 'https://api.openai.com/v1', model: 'gpt-4o-mini', env: 'OPENAI_API_KEY' },
  anthropic: { kind: 'anthropic', base: 'https://api.anthropic.com', model: 'claude-3-5-haiku-latest', env: 'ANTHROPIC_API_KEY' },
  gemini: { kind: 'gemini', base: 'https://generativelanguage.googleapis.com/v1beta', model: 'gemini-2.0-flash', env: 'GEMINI_API_KEY' },
  ollama: { kind: 'openai', base: 'http://127.0.0.1:11434/v1', model: 'llama3.2', env: '' },
} as const;

interface GatewayAnswers {
  readonly listen: string;
  readonly token?: Secret;
}

/** Runs the interview; returns the exit code (0 written, 1 key check failed and not confirmed, 2 bad answers, 130 Ctrl-C). */
export async function runOnboard(args: readonly string[], io: OnboardIo): Promise<number> {
  if (args.length > 0) {
    io.stderr.write(`switchboard: unexpected argument "${args[0]}" for "switchboard onboard"\n`);
    return 2;
  }
  const ask = createPrompt(io.stdin, io.stdout);
  try {
    return await interview(ask, io);
  } catch (error) {
    if (error instanceof InterruptedError) {
      io.stderr.write('\nswitchboard onboard: interrupted; nothing was written.\n');
      return 130;
    }
    if (error instanceof InputEndedError) return bad(io, `${error.message}; nothing was written`);
    throw error;
  } finally {
    ask.close();
  }
}

async function interview(ask: Prompt, io: OnboardIo): Promise<number> {
  const target = resolve(io.cwd ?? process.cwd(), io.configFlag ?? (io.env.SWITCHBOARD_CONFIG || 'switchboard.toml'));
  const providerName = await ask.text(`Model provider (${Object.keys(PROVIDERS).join(', ')})`, 'openai', (answer) => (answer in PROVIDERS ? undefined : `unknown provider; one of ${Object.keys(PROVIDERS).join(', ')}`));
  const preset = PROVIDERS[providerName as keyof typeof PROVIDERS];
  const baseUrl = await ask.text('Endpoint URL', preset.base, field('provider', 'base_url'));
  const model = await ask.text('Model', preset.model, field('provider', 'model'));
  const keyEnv = preset.env === '' ? '' : await ask.text('Environment variable that will hold the API key', preset.env, envName);
  let key = keyEnv === '' ? '' : (io.env[keyEnv] ?? '');
  if (keyEnv !== '' && key !== '') io.stdout.write(`Using the key in $${keyEnv}.\n`);
  else if (keyEnv !== '') key = await ask.secret(`API key (hidden; checked now, never written to the file; later export ${keyEnv}=…)`);

  const isChannel = (name: string): string | undefined => ((channelNames as readonly string[]).includes(name) ? undefined : `not a channel; one of ${channelNames.join(', ')}`);
  const chosen = await ask.list(`Channels, comma-separated (${channelNames.join(', ')})`, ['terminal'], isChannel, true);
  const channels: ChannelAnswers[] = [];
  for (const name of new Set(chosen as ChannelName[])) channels.push(await askChannel(name, ask));
  const gateway = await askGateway(ask, channels.some((channel) => channel.name === 'webhook'), io);

  const text = renderConfig({ kind: preset.kind, baseUrl, model, keyEnv, channels, ...(gateway ? { gateway } : {}) });
  const secrets = [...channels.flatMap((channel) => channel.secrets), ...(gateway?.token ? [gateway.token] : [])];
  // The file must load once the variables are exported: check it with stand-ins for them.
  const standIns = Object.fromEntries([...secrets.map((secret) => secret.env), ...(keyEnv ? [keyEnv] : [])].map((name) => [name, 'stand-in-secret-value-0123456789']));
  let config;
  try {
    config = parseConfig(text, target, { ...io.env, ...standIns, ...(keyEnv && key ? { [keyEnv]: key } : {}) });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return bad(io, `the answers make an invalid config; nothing was written:\n${error.message}`);
  }

  if (keyEnv !== '' && key === '') io.stdout.write(`No key given: the check below goes without one (export ${keyEnv}=… before starting).\n`);
  io.stdout.write('Checking the model endpoint with one real call… ');
  const timeoutMs = io.timeoutMs ?? 15_000;
  const { api_key: _standIn, ...keyless } = config.provider;
  const withoutKey = key === '' ? { ...config, provider: { ...keyless, api_keys: [] } } : config;
  const result = await checkEndpoint('provider', withoutKey.provider, timeoutMs, () => chatProbe(withoutKey, timeoutMs));
  io.stdout.write(`${result.ok ? '✓' : '✗'} ${result.detail}${result.fix && !result.ok ? `; fix: ${result.fix}` : ''}\n`);
  if (!result.ok && !(await ask.yes('Write the config anyway?', false))) return 1;

  makeDirectory(dirname(target));
  if (existsSync(target)) {
    let backup = `${target}.bak`;
    for (let n = 1; existsSync(backup); n++) backup = `${target}.bak.${n}`;
    copyFileSync(target, backup);
    // copyFile keeps the original's mode; the old config may hold literal keys, so its copy is private.
    chmodSync(backup, 0o600);
    io.stdout.write(`Kept the previous config as ${backup}\n`);
  }
  writeFileSync(target, text, { mode: 0o600 });
  chmodSync(target, 0o600); // mode only applies to a new file
  io.stdout.write(`Wrote ${target}\n`);
  const exports = [
    ...(keyEnv ? [`export ${keyEnv}=…`] : []),
    ...secrets.map((secret) => (secret === gateway?.token ? `export ${secret.env}=$(openssl rand -hex 32)   # ${secret.hint}` : `export ${secret.env}=…   # ${secret.hint}`)),
  ];
  const terminalOnly = channels.every((channel) => channel.name === 'terminal');
  // Not on PATH in a checkout: `npx switchboard` there (issue 25).
  const command = switchboardCommand({ env: io.env, cwd: io.cwd ?? process.cwd(), ...(io.installRoot === undefined ? {} : { installRoot: io.installRoot }) });
  io.stdout.write(`Next:\n${exports.map((line) => `  ${line}\n`).join('')}  ${command} doctor --config ${target}\n  ${command} ${terminalOnly ? 'chat' : 'start'} --config ${target}\n`);
  return 0;
}

/** [gateway]: on by default (status and reload use it), required by the webhook channel. */
async function askGateway(ask: Prompt, required: boolean, io: OnboardIo): Promise<GatewayAnswers | undefined> {
  if (required) io.stdout.write('The webhook channel is served by the HTTP gateway, so [gateway] is on.\n');
  else if (!(await ask.yes('HTTP gateway (switchboard status and reload ask the daemon through it; also /healthz and /metrics)', true))) return undefined;
  const listen = await ask.text('Gateway: address to listen on (keep it on loopback behind a proxy)', '127.0.0.1:8787', (answer) => {
    const problem = field('gateway', 'listen')(answer);
    if (problem !== undefined) return problem;
    try {
      parseListen(answer);
      return undefined;
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
  });
  const loopback = isLoopback(parseListen(listen).host);
  const tokenEnv = loopback
    ? await ask.text('Gateway: environment variable for its bearer token (empty = none, fine on loopback)', '', (answer) => (answer === '' ? undefined : envName(answer)))
    : await ask.text('Gateway: environment variable for its bearer token (required off loopback)', 'SWITCHBOARD_TOKEN', envName);
  return { listen, ...(tokenEnv === '' ? {} : { token: { env: tokenEnv, hint: 'at least 16 characters; switchboard status and reload need it too' } }) };
}

function renderConfig(answers: { kind: string; baseUrl: string; model: string; keyEnv: string; channels: readonly ChannelAnswers[]; gateway?: GatewayAnswers }): string {
  const q = (value: string) => JSON.stringify(value);
  return [
    '# Switchboard config written by `switchboard onboard`. Every other key and its default is',
    '# in switchboard.example.toml. Secrets stay out of this file: "${NAME}" reads the',
    '# environment variable NAME when Switchboard starts.',
    '',
    "# The database and workspace; relative paths are taken from this file's directory.",
    'data_dir = "./data"',
    '',
    '[provider]',
    `kind = ${q(answers.kind)}`,
    `base_url = ${q(answers.baseUrl)}`,
    `model = ${q(answers.model)}`,
    ...(answers.keyEnv ? [`api_key = "\${${answers.keyEnv}}"`] : ['# No key: a local server that needs none.']),
    '',
    ...(answers.gateway
      ? [
          '# The HTTP gateway: /healthz, /readyz, /metrics, and /api/status and /api/reload, which',
          '# `switchboard status` and `switchboard reload` use. Remove the table to turn it off.',
          '[gateway]',
          `listen = ${q(answers.gateway.listen)}`,
          ...(answers.gateway.token ? [`token = "\${${answers.gateway.token.env}}"`] : ['# token = "${SWITCHBOARD_TOKEN}"   # required off loopback, at least 16 characters']),
          '',
        ]
      : ['# No [gateway]: `switchboard reload` signals the daemon instead; `switchboard status` needs one.', '']),
    '# Who may talk: `allow` lists sender ids (["*"] = anyone); without it a stranger gets a',
    '# pairing code and nothing else until you run `switchboard pairing approve <channel> <code>`.',
    ...answers.channels.flatMap((channel) => [`[channels.${channel.name}]`, ...channel.lines, '']),
  ].join('\n');
}

function bad(io: OnboardIo, message: string): number {
  io.stderr.write(`switchboard onboard: ${message}\n`);
  return 2;
}
