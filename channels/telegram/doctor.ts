/** `switchboard doctor` for Telegram: getMe, the cheapest call that proves the bot token. Plain fetch, a deadline, never throws. */
import { errorMessage, failed, pass, redact, request, type CheckResult } from '../../src/setup/probe.ts';
import type { TelegramConfig } from './config.ts';

export async function probe(config: TelegramConfig, timeoutMs: number): Promise<CheckResult[]> {
  return [await check(config, timeoutMs)];
}

async function check(config: TelegramConfig, timeoutMs: number): Promise<CheckResult> {
  const name = 'channel telegram';
  const root = (config.api_root ?? 'https://api.telegram.org').replace(/\/+$/, '');
  const answer = await request(`${root}/bot${config.token}/getMe`, {}, timeoutMs);
  if ('error' in answer) return failed(name, `${new URL(root).host} unreachable: ${redact(answer.error, [config.token])}`, 'check the network (and channels.telegram.api_root if set)');
  const body = answer.body as { ok?: boolean; result?: { username?: string }; description?: string };
  if (answer.status === 401 || answer.status === 404) {
    return failed(name, `the bot token was rejected (HTTP ${answer.status}${body?.description ? `: ${redact(body.description, [config.token])}` : ''})`, 'copy the token from @BotFather (/token) into channels.telegram.token (e.g. "${TELEGRAM_BOT_TOKEN}")');
  }
  if (body?.ok !== true) return failed(name, `getMe answered HTTP ${answer.status}: ${redact(errorMessage(answer.body), [config.token])}`, 'retry later; check channels.telegram.api_root if set');
  return pass(name, `token valid: @${body.result?.username ?? '?'}`);
}
