/** `switchboard doctor` for Discord: GET /users/@me, the cheapest call that proves the bot token. Plain fetch, a deadline, never throws. */
import { errorMessage, failed, pass, redact, request, type CheckResult } from '../../src/setup/probe.ts';
import type { DiscordConfig } from './config.ts';

export async function probe(config: DiscordConfig, timeoutMs: number): Promise<CheckResult[]> {
  return [await check(config, timeoutMs)];
}

async function check(config: DiscordConfig, timeoutMs: number): Promise<CheckResult> {
  const name = 'channel discord';
  const api = (config.api_base ?? 'https://discord.com/api').replace(/\/+$/, '');
  const answer = await request(`${api}/v10/users/@me`, { headers: { authorization: `Bot ${config.token}` } }, timeoutMs);
  if ('error' in answer) return failed(name, `${new URL(api).host} unreachable: ${redact(answer.error, [config.token])}`, 'check the network (and channels.discord.api_base if set)');
  if (answer.status === 401) return failed(name, 'the bot token was rejected (HTTP 401)', 'Developer Portal → your application → Bot → Reset Token; put it in channels.discord.token (e.g. "${DISCORD_BOT_TOKEN}")');
  const body = answer.body as { username?: string; bot?: boolean };
  if (answer.status !== 200) return failed(name, `GET /users/@me answered HTTP ${answer.status}: ${redact(errorMessage(answer.body), [config.token])}`, 'retry later');
  return pass(name, `token valid: ${body.username ?? '?'}${body.bot === false ? ' (not a bot account!)' : ''}`);
}
