/** `switchboard doctor` for Slack: auth.test proves the bot token (and app_token looks like one). Plain fetch, a deadline, never throws. */
import { failed, pass, redact, request, type CheckResult } from '../../src/setup/probe.ts';
import type { SlackConfig } from './config.ts';

export async function probe(config: SlackConfig, timeoutMs: number): Promise<CheckResult[]> {
  return [await check(config, timeoutMs)];
}

async function check(config: SlackConfig, timeoutMs: number): Promise<CheckResult> {
  const name = 'channel slack';
  const api = config.api_url ?? 'https://slack.com/api/';
  const answer = await request(`${api.endsWith('/') ? api : `${api}/`}auth.test`, { method: 'POST', headers: { authorization: `Bearer ${config.bot_token}` } }, timeoutMs);
  if ('error' in answer) return failed(name, `${new URL(api).host} unreachable: ${redact(answer.error, [config.bot_token])}`, 'check the network (and channels.slack.api_url if set)');
  const body = answer.body as { ok?: boolean; error?: string; user?: string; team?: string };
  if (body?.ok !== true) {
    const auth = ['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired'].includes(body?.error ?? '');
    return failed(name, `auth.test failed: ${body?.error ?? `HTTP ${answer.status}`}`, auth ? 'reinstall the app to the workspace and copy the Bot User OAuth Token (xoxb-…) into channels.slack.bot_token' : 'retry later');
  }
  const socket = config.app_token !== undefined && !config.app_token.startsWith('xapp-') ? ' — but app_token does not start with xapp-' : '';
  if (socket) return failed(name, `bot token valid (${body.user ?? '?'} in ${body.team ?? '?'})${socket}`, 'Basic Information → App-Level Tokens: create one with connections:write and put it in channels.slack.app_token');
  return pass(name, `bot token valid: ${body.user ?? '?'} in ${body.team ?? '?'}`);
}
