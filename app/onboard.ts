/**
 * `switchboard onboard`: a few questions (provider, model, key, one channel), one real call
 * to check the key, then a commented config file. Secrets are never written into the file:
 * it reads them as "${NAME}", and the answer tells where to put them. An existing config is
 * kept as `.bak` first. Answers come from any stream, so tests script them.
 */
import { chmodSync, copyFileSync, existsSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseConfig } from '../src/config/load.ts';
import { makeDirectory } from '../src/store/files.ts';
import { checkEndpoint } from './doctor-remote.ts';
import { chatProbe } from './doctor.ts';

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
}

const PROVIDERS = {
  openai: { kind: 'openai', base: 'https://api.openai.com/v1', model: 'gpt-4o-mini', env: 'OPENAI_API_KEY' },
  anthropic: { kind: 'anthropic', base: 'https://api.anthropic.com', model: 'claude-3-5-haiku-latest', env: 'ANTHROPIC_API_KEY' },
  gemini: { kind: 'gemini', base: 'https://generativelanguage.googleapis.com/v1beta', model: 'gemini-2.0-flash', env: 'GEMINI_API_KEY' },
  ollama: { kind: 'openai', base: 'http://127.0.0.1:11434/v1', model: 'llama3.2', env: '' },
} as const;

const CHANNELS = {
  terminal: { table: '[channels.terminal]', lines: [], env: '', hint: '' },
  telegram: { table: '[channels.telegram]', lines: ['token = "${TELEGRAM_BOT_TOKEN}"'], env: 'TELEGRAM_BOT_TOKEN', hint: '@BotFather → /newbot' },
  discord: { table: '[channels.discord]', lines: ['token = "${DISCORD_BOT_TOKEN}"'], env: 'DISCORD_BOT_TOKEN', hint: 'Developer Portal → Bot → Reset Token; enable the Message Content intent' },
  slack: { table: '[channels.slack]', lines: ['bot_token = "${SLACK_BOT_TOKEN}"', 'app_token = "${SLACK_APP_TOKEN}"'], env: 'SLACK_BOT_TOKEN', hint: 'the xoxb- bot token; also export SLACK_APP_TOKEN (xapp-, Socket Mode)' },
} as const;

/** Runs the interview; returns the exit code (0 written, 1 key check failed and not confirmed, 2 bad answers). */
export async function runOnboard(args: readonly string[], io: OnboardIo): Promise<number> {
  if (args.length > 0) {
    io.stderr.write(`switchboard: unexpected argument "${args[0]}" for "switchboard onboard"\n`);
    return 2;
  }
  const lines = createInterface({ input: io.stdin, terminal: false });
  const queue: string[] = [];
  const waiting: Array<(line: string | undefined) => void> = [];
  let ended = false;
  lines.on('line', (line) => (waiting.length > 0 ? waiting.shift()!(line) : queue.push(line)));
  lines.on('close', () => {
    ended = true;
    for (const resolve of waiting.splice(0)) resolve(undefined);
  });
  const ask = async (question: string, fallback: string): Promise<string> => {
    io.stdout.write(`${question} [${fallback}]: `);
    const line = queue.length > 0 ? queue.shift() : ended ? undefined : await new Promise<string | undefined>((resolve) => waiting.push(resolve));
    const answer = (line ?? '').trim();
    if (line !== undefined && !(io.stdin as { isTTY?: boolean }).isTTY) io.stdout.write('\n');
    return answer === '' ? fallback : answer;
  };
  try {
    const target = resolve(io.cwd ?? process.cwd(), io.configFlag ?? io.env.SWITCHBOARD_CONFIG ?? 'switchboard.toml');
    const providerName = await ask(`Model provider (${Object.keys(PROVIDERS).join(', ')})`, 'openai');
    const preset = PROVIDERS[providerName as keyof typeof PROVIDERS];
    if (!preset) return bad(io, `unknown provider "${providerName}"`);
    const baseUrl = await ask('Endpoint URL', preset.base);
    const model = await ask('Model', preset.model);
    const envName = preset.env === '' ? '' : await ask('Environment variable that will hold the API key', preset.env);
    const key = envName === '' ? '' : io.env[envName] || (await ask(`API key (checked now, never written to the file; later export ${envName}=…)`, ''));
    const channelName = await ask(`Channel (${Object.keys(CHANNELS).join(', ')})`, 'terminal');
    const channel = CHANNELS[channelName as keyof typeof CHANNELS];
    if (!channel) return bad(io, `unknown channel "${channelName}"`);
    const text = renderConfig({ kind: preset.kind, baseUrl, model, envName, channel });

    const config = parseConfig(text, target, { ...io.env, ...(envName ? { [envName]: key || 'unset' } : {}) }, { requireSecrets: false });
    io.stdout.write('Checking the model endpoint with one real call… ');
    const timeoutMs = io.timeoutMs ?? 15_000;
    const result = await checkEndpoint('provider', config.provider, timeoutMs, () => chatProbe(config, timeoutMs));
    io.stdout.write(`${result.ok ? '✓' : '✗'} ${result.detail}${result.fix && !result.ok ? `; fix: ${result.fix}` : ''}\n`);
    if (!result.ok && !/^y/i.test(await ask('Write the config anyway?', 'no'))) return 1;

    makeDirectory(dirname(target));
    if (existsSync(target)) {
      let backup = `${target}.bak`;
      for (let n = 1; existsSync(backup); n++) backup = `${target}.bak.${n}`;
      copyFileSync(target, backup);
      io.stdout.write(`Kept the previous config as ${backup}\n`);
    }
    writeFileSync(target, text, { mode: 0o600 });
    chmodSync(target, 0o600); // mode only applies to a new file
    io.stdout.write(`Wrote ${target}\n`);
    const exports = [envName && `export ${envName}=…`, channel.env && `export ${channel.env}=…   # ${channel.hint}`].filter(Boolean);
    io.stdout.write(`Next:\n${exports.map((line) => `  ${line}\n`).join('')}  switchboard doctor --config ${target}\n  switchboard ${channelName === 'terminal' ? 'chat' : 'start'} --config ${target}\n`);
    return 0;
  } finally {
    lines.close();
  }
}

function renderConfig(answers: { kind: string; baseUrl: string; model: string; envName: string; channel: (typeof CHANNELS)[keyof typeof CHANNELS] }): string {
  const q = (value: string) => JSON.stringify(value);
  return [
    '# Switchboard config written by `switchboard onboard`. Every other key and its default is',
    '# in switchboard.example.toml. Secrets stay out of this file: "${NAME}" reads the',
    '# environment variable NAME when Switchboard starts.',
    '',
    '# The database and workspace; relative paths are taken from this file\'s directory.',
    'data_dir = "./data"',
    '',
    '[provider]',
    `kind = ${q(answers.kind)}`,
    `base_url = ${q(answers.baseUrl)}`,
    `model = ${q(answers.model)}`,
    ...(answers.envName ? [`api_key = "\${${answers.envName}}"`] : ['# No key: a local server that needs none.']),
    '',
    '# Who may talk: without `allow`, a stranger gets a pairing code (switchboard pairing approve …).',
    answers.channel.table,
    ...answers.channel.lines,
    '',
  ].join('\n');
}

function bad(io: OnboardIo, message: string): number {
  io.stderr.write(`switchboard onboard: ${message}\n`);
  return 2;
}
