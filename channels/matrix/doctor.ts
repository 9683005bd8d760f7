/** `switchboard doctor` for Matrix: whoami proves the access token (a password login is not tried). Plain fetch, a deadline, never throws. */
import { errorMessage, failed, pass, redact, request, type CheckResult } from '../../src/setup/probe.ts';
import type { MatrixConfig } from './config.ts';

export async function probe(config: MatrixConfig, timeoutMs: number): Promise<CheckResult[]> {
  return [await check(config, timeoutMs)];
}

async function check(config: MatrixConfig, timeoutMs: number): Promise<CheckResult> {
  const name = 'channel matrix';
  const base = config.homeserver.replace(/\/+$/, '');
  const secrets = [config.access_token, config.password];
  if (config.access_token === undefined) {
    const answer = await request(`${base}/_matrix/client/versions`, {}, timeoutMs);
    if ('error' in answer || answer.status !== 200) {
      return failed(name, `homeserver ${base} unreachable: ${'error' in answer ? answer.error : `HTTP ${answer.status}`}`, 'check channels.matrix.homeserver');
    }
    return pass(name, `homeserver ${base} reachable (password login is not tried by doctor)`);
  }
  const answer = await request(`${base}/_matrix/client/v3/account/whoami`, { headers: { authorization: `Bearer ${config.access_token}` } }, timeoutMs);
  if ('error' in answer) return failed(name, `homeserver ${base} unreachable: ${redact(answer.error, secrets)}`, 'check channels.matrix.homeserver and the network');
  const body = answer.body as { user_id?: string; errcode?: string };
  if (answer.status === 401 || answer.status === 403) {
    return failed(name, `the access token was rejected (${body?.errcode ?? `HTTP ${answer.status}`})`, 'log the bot in again and put the new token in channels.matrix.access_token, or use password instead');
  }
  if (answer.status !== 200) return failed(name, `whoami answered HTTP ${answer.status}: ${redact(errorMessage(answer.body), secrets)}`, 'check channels.matrix.homeserver');
  if (body.user_id !== config.user_id) return failed(name, `the token belongs to ${body.user_id ?? '?'}, not ${config.user_id}`, `set channels.matrix.user_id = "${body.user_id ?? ''}" or use the bot's own token`);
  return pass(name, `access token valid: ${body.user_id}`);
}
