/** The console API client: JSON in and out, the CSRF token on every change, errors as ApiError. */

export class ApiError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export interface SessionInfo {
  signedIn: boolean;
  operator?: string;
  csrf?: string;
  tokenRequired: boolean;
}

const state = { csrf: '' };

export function setCsrf(token: string): void {
  state.csrf = token;
}

export async function api<T>(path: string, options: { method?: 'GET' | 'POST' | 'DELETE'; body?: unknown } = {}): Promise<T> {
  const method = options.method ?? 'GET';
  const headers: Record<string, string> = { accept: 'application/json' };
  if (method !== 'GET') headers['x-csrf-token'] = state.csrf;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, { method, headers, credentials: 'same-origin', ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }) });
  const text = await response.text();
  let parsed: unknown = undefined;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    // not JSON
  }
  if (!response.ok) {
    const message = (parsed as { error?: string; problems?: string[] } | undefined)?.error ?? `HTTP ${response.status}`;
    const error = new ApiError(response.status, message);
    (error as ApiError & { body?: unknown }).body = parsed;
    throw error;
  }
  return parsed as T;
}

/** An operator's action: POSTs it, says how it went (`done`, or the error), and reloads the page's data either way. */
export async function postAction(path: string, body: unknown, done: string, say: (message: string) => void, reload: () => void): Promise<void> {
  try {
    await api(path, { method: 'POST', body });
    say(done);
  } catch (e) {
    say((e as Error).message);
  }
  reload();
}

/** "3m ago", "2h ago" — a wall time relative to now. */
export function ago(at: number | string | undefined): string {
  if (at === undefined) return 'never';
  const ms = Date.now() - (typeof at === 'string' ? Date.parse(at) : at);
  if (ms < 5000) return 'just now';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s ago`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m}m ago`;
  const h = Math.round(m / 60);
  return h < 48 ? `${h}h ago` : `${Math.round(h / 24)}d ago`;
}

export function duration(seconds: number): string {
  const m = Math.floor(seconds / 60);
  if (m < 1) return `${Math.max(0, Math.round(seconds))}s`;
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  return h < 48 ? `${h}h ${m % 60}m` : `${Math.floor(h / 24)}d ${h % 24}h`;
}
