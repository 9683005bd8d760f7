/**
 * The checks of `switchboard doctor` that reach out: the model endpoint (one cheap
 * authenticated call) and each channel's credentials (the platform's cheapest identity call),
 * with plain fetch and sockets — never the platform SDKs, which take hundreds of ms to load
 * and retry on their own. Every check has a deadline and never throws.
 */
import type { Config, EndpointConfig } from '../src/config/schema.ts';
import { errorMessage, failed, pass, redact, request, type CheckResult } from '../src/setup/probe.ts';
import type { ChannelModule } from '../src/channel-module.ts';

export type { CheckResult } from '../src/setup/probe.ts';

/** The model endpoint: list its models (free, authenticated); a server without /models gets one tiny chat call. */
export async function checkEndpoint(name: string, endpoint: EndpointConfig, timeoutMs: number, chatProbe: () => Promise<void>): Promise<CheckResult> {
  const key = endpoint.api_key ?? endpoint.api_keys[0];
  let url: string;
  const headers: Record<string, string> = {};
  switch (endpoint.kind) {
    case 'openai':
      url = `${(endpoint.base_url ?? 'https://api.openai.com/v1').replace(/\/+$/, '')}/models`;
      if (key) headers.authorization = `Bearer ${key}`;
      break;
    case 'anthropic':
      url = `${(endpoint.base_url ?? 'https://api.anthropic.com').replace(/\/+$/, '').replace(/\/v1$/, '')}/v1/models`;
      headers['anthropic-version'] = '2023-06-01';
      if (key) headers['x-api-key'] = key;
      break;
    case 'gemini':
      url = `${(endpoint.base_url ?? 'https://generativelanguage.googleapis.com/v1beta').replace(/\/+$/, '')}/models`;
      if (key) headers['x-goog-api-key'] = key;
      break;
  }
  const where = `${endpoint.kind} ${endpoint.model} at ${new URL(url).origin}`;
  const keyHint = endpoint.api_key === undefined ? 'set provider.api_key (e.g. "${OPENAI_API_KEY}")' : 'check the key in provider.api_key (and the environment variable it reads)';
  const answer = await request(url, { headers }, timeoutMs);
  if ('error' in answer) {
    return failed(name, `${where} unreachable: ${redact(answer.error, [key])}`, `check provider.base_url, the network, and that the server is running`);
  }
  if (answer.status === 401 || answer.status === 403) {
    const refused = key === undefined ? 'asks for a key, and none is configured' : 'refused the key';
    return failed(name, `${where} ${refused} (HTTP ${answer.status}: ${redact(errorMessage(answer.body), [key])})`, keyHint);
  }
  // Say what was checked: a server that needs no key (Ollama) answers without one.
  const noKey = key === undefined ? ' (no key configured; the endpoint answered without one)' : '';
  if (answer.status === 404 || answer.status === 405) {
    // Some OpenAI-compatible servers have no /models: one real chat call instead.
    try {
      await chatProbe();
      return pass(name, `${where} answered a test message${noKey}`);
    } catch (error) {
      const text = redact(error instanceof Error ? error.message : String(error), [key]);
      const auth = /\b(401|403)\b/.test(text);
      return failed(name, `${where}: ${text}`, auth ? keyHint : 'check provider.base_url (the URL before /chat/completions) and provider.model');
    }
  }
  if (answer.status < 200 || answer.status >= 300) {
    return failed(name, `${where} answered HTTP ${answer.status}: ${redact(errorMessage(answer.body), [key])}`, 'check provider.base_url; retry later if the service is having trouble');
  }
  const listed = ((answer.body as { data?: Array<{ id?: string }>; models?: Array<{ name?: string; id?: string }> } | null)?.data ??
    (answer.body as { models?: Array<{ name?: string; id?: string }> } | null)?.models ??
    []) as Array<{ id?: string; name?: string }>;
  const ids = listed.map((model) => (model.id ?? model.name ?? '').replace(/^models\//, ''));
  const accepted = key === undefined ? 'no key configured; the endpoint answered without one' : 'key accepted';
  if (ids.length > 0 && !ids.some((id) => id === endpoint.model || id.startsWith(`${endpoint.model}:`))) {
    return { check: name, ok: true, warning: true, detail: `${where}: ${accepted}, but "${endpoint.model}" is not among its ${ids.length} models`, fix: `check provider.model; it offers e.g. ${ids.slice(0, 5).join(', ')}` };
  }
  return pass(name, `${where}: ${accepted}${ids.length > 0 ? ', model available' : ''}`);
}

/** One check per configured channel that has a probe (the terminal needs none), in the registry's order. */
export function checkChannels(modules: readonly ChannelModule[], channels: Config['channels'], timeoutMs: number): Array<Promise<CheckResult[]>> {
  return modules.flatMap((module) => (module.probe && channels[module.name] !== undefined ? [module.probe(channels[module.name] as never, timeoutMs)] : []));
}
