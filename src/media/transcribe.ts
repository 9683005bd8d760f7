/**
 * Voice notes and audio files to text through an OpenAI-compatible transcription endpoint
 * (OpenAI, Groq, a local whisper server): `POST {base_url}/audio/transcriptions`, a
 * multipart/form-data body with `file`, `model`, `response_format=json` and optionally
 * `language`, answered with `{"text": "…"}` (OpenAI API reference, "Audio → Create
 * transcription": https://platform.openai.com/docs/api-reference/audio/createTranscription).
 *
 * The endpoint goes by the file name's extension and takes only flac, mp3, mp4, mpeg, mpga, m4a,
 * ogg, wav and webm (same page, `file`); anything else is a 400 "Invalid file format". So the
 * name sent is chosen from the bytes (OggS, ID3/MPEG frames, fLaC, RIFF/WAVE, ISO-BMFF `ftyp`,
 * EBML): Telegram's voice notes are OGG/Opus stored as `.oga`, WhatsApp's are OGG/Opus named
 * `.opus` — both go as `.ogg`. A request may be at most 25 MB (OpenAI Help, "Audio API FAQ":
 * https://help.openai.com/en/articles/7031512-whisper-api-faq); a larger file is refused here
 * with a clear line, not cut (cutting Opus or MP3 well needs a decoder we do not ship).
 *
 * Retries like the providers' (src/providers/reliable.ts): 429, 5xx and network failures are
 * retried with backoff, at least `Retry-After`, a hang once at most; other 4xx are not.
 * Loaded by the agent only when `[transcription]` is configured.
 */
import { readFile, realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import type { Logger } from 'pino';
import { ProviderError } from '../provider.ts';
import { errorInBody, httpFailure, isObject, readJsonObject, type EndpointCall } from '../endpoint/http.ts';
import { createEndpointClient, type EndpointClient, type EndpointResponse } from '../endpoint/client.ts';
import { multipartBody } from '../endpoint/multipart.ts';
import { backoffDelay, sleep as defaultSleep } from '../backoff.ts';

export type TranscriptResult = { readonly ok: true; readonly text: string } | { readonly ok: false; readonly reason: string };

export interface Transcriber {
  /** The audio at `path` (relative to the workspace) as text. Never throws but for the caller's abort. */
  transcribe(path: string, signal: AbortSignal): Promise<TranscriptResult>;
}

export interface TranscriberOptions {
  /** e.g. https://api.openai.com/v1 (the request goes to `{baseUrl}/audio/transcriptions`). */
  readonly baseUrl: string;
  readonly model: string;
  readonly apiKey?: string;
  /** ISO-639-1; absent = the endpoint detects it. */
  readonly language?: string;
  readonly timeoutMs: number;
  /** Retries after the first try. @default 2 */
  readonly maxRetries?: number;
  /** A longer Retry-After is not waited for. @default 30000 */
  readonly maxRetryAfterMs?: number;
  /** Files larger than this are refused. @default 25 MiB */
  readonly maxBytes?: number;
  /** Absolute, real path of the workspace. */
  readonly workspace: string;
  readonly log: Logger;
  /** @default 500 */
  readonly initialBackoffMs?: number;
  /** @default 10000 */
  readonly maxBackoffMs?: number;
  /** Injectable for tests. */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly random?: () => number;
  /** The HTTP client (its connection pool); absent = the transcriber makes its own. */
  readonly client?: EndpointClient;
}

/** The extensions the endpoint accepts, with the MIME type sent beside them. */
const ACCEPTED: Readonly<Record<string, string>> = {
  flac: 'audio/flac',
  mp3: 'audio/mpeg',
  mp4: 'audio/mp4',
  mpeg: 'audio/mpeg',
  mpga: 'audio/mpeg',
  m4a: 'audio/mp4',
  ogg: 'audio/ogg',
  wav: 'audio/wav',
  webm: 'audio/webm',
};

/** Names the endpoint rejects for formats it does take. */
const RENAMED: Readonly<Record<string, string>> = { oga: 'ogg', opus: 'ogg', mpa: 'mp3', aac: 'm4a', m4b: 'm4a', wave: 'wav', weba: 'webm' };

/** The format by its first bytes, as an accepted extension; undefined when none matches. */
export function sniffAudio(bytes: Uint8Array): string | undefined {
  const ascii = (from: number, to: number): string => String.fromCharCode(...bytes.subarray(from, to));
  if (bytes.length < 4) return undefined;
  if (ascii(0, 4) === 'OggS') return 'ogg';
  if (ascii(0, 4) === 'fLaC') return 'flac';
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WAVE') return 'wav';
  if (ascii(4, 8) === 'ftyp') return 'm4a';
  if (bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3) return 'webm';
  if (ascii(0, 3) === 'ID3' || (bytes[0] === 0xff && (bytes[1]! & 0xe0) === 0xe0)) return 'mp3';
  return undefined;
}

/** The extension to send for a file named `name`: its bytes first, then its name. */
export function uploadExtension(name: string, bytes: Uint8Array): string | undefined {
  const sniffed = sniffAudio(bytes);
  if (sniffed) return sniffed;
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase() ?? '';
  if (ACCEPTED[ext]) return ext;
  return RENAMED[ext];
}

const megabytes = (bytes: number): string => (bytes < 1024 * 1024 ? `${Math.round(bytes / 1024)} KB` : `${(bytes / 1024 / 1024).toFixed(1)} MB`);

export function createTranscriber(options: TranscriberOptions): Transcriber {
  const url = `${options.baseUrl.replace(/\/+$/, '')}/audio/transcriptions`;
  const maxBytes = options.maxBytes ?? 25 * 1024 * 1024;
  const maxRetries = options.maxRetries ?? 2;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 30_000;
  const backoff = { initialMs: options.initialBackoffMs ?? 500, maxMs: options.maxBackoffMs ?? 10_000 };
  const wait = options.sleep ?? defaultSleep;
  const random = options.random ?? Math.random;
  const client = options.client ?? createEndpointClient();

  const inside = (path: string): boolean => {
    const rel = relative(options.workspace, path);
    return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
  };

  async function read(path: string): Promise<{ ok: true; bytes: Buffer } | { ok: false; reason: string }> {
    const full = resolve(options.workspace, path);
    try {
      const real = await realpath(full);
      if (!inside(full) || !inside(real)) return { ok: false, reason: 'the file is outside the workspace' };
      const info = await stat(real);
      if (!info.isFile()) return { ok: false, reason: 'it is not a file' };
      if (info.size > maxBytes) {
        return { ok: false, reason: `the file is ${megabytes(info.size)}, over the ${megabytes(maxBytes)} the transcription endpoint takes ([transcription] max_audio_mb); ask for a shorter recording` };
      }
      if (info.size === 0) return { ok: false, reason: 'the file is empty' };
      return { ok: true, bytes: await readFile(real) };
    } catch (error) {
      return { ok: false, reason: `the file could not be read (${(error as NodeJS.ErrnoException).code ?? 'read error'})` };
    }
  }

  /** One request; a failure is a ProviderError (status, Retry-After) whose message names the endpoint. */
  async function once(bytes: Buffer, ext: string, signal: AbortSignal): Promise<string> {
    const deadline = AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs)]);
    const call: EndpointCall = { url, timeoutMs: options.timeoutMs, signal, deadline };
    const fields: Array<[string, string]> = [
      ['model', options.model],
      ['response_format', 'json'],
    ];
    if (options.language) fields.push(['language', options.language]);
    const form = multipartBody({ name: 'file', filename: `audio.${ext}`, type: ACCEPTED[ext]!, bytes }, fields);
    let response: EndpointResponse;
    try {
      const headers: Record<string, string> = { 'content-type': form.contentType, ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) };
      response = await client.post(url, { headers, body: form.body, signal: deadline });
    } catch (error) {
      if (signal.aborted) throw error;
      const timedOut = error instanceof Error && error.name === 'TimeoutError';
      throw new ProviderError(timedOut ? `no answer within ${options.timeoutMs} ms ([transcription] timeout_seconds)` : `${url} unreachable: ${describe(error)}`, { cause: error });
    }
    if (!response.ok) throw await httpFailure(call, response, () => undefined);
    const { body, text } = await readJsonObject(call, response);
    const inBody = errorInBody(call, response.status, body);
    if (inBody) throw inBody;
    if (!isObject(body) || typeof body.text !== 'string') throw new ProviderError(`the answer has no "text": ${text.slice(0, 200)}; check that base_url is an OpenAI-compatible API`, { status: response.status });
    return body.text;
  }

  return {
    async transcribe(path, signal) {
      const file = await read(path);
      if (!file.ok) return file;
      const ext = uploadExtension(path, file.bytes);
      if (!ext) return { ok: false, reason: `it is not in an audio format the transcription endpoint takes (${Object.keys(ACCEPTED).join(', ')})` };
      let timeouts = 0;
      for (let attempt = 0; ; attempt++) {
        try {
          const text = (await once(file.bytes, ext, signal)).trim();
          if (text === '') return { ok: false, reason: 'the transcription came back empty (silence, or speech too unclear)' };
          return { ok: true, text };
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          const failure = error instanceof ProviderError ? error : new ProviderError(describe(error), { cause: error });
          const reason = failure.message.replace(/^model endpoint/, 'the transcription endpoint').replace(/\(the provider's timeout_seconds\)/, '([transcription] timeout_seconds)');
          const timedOut = failure.cause instanceof Error && failure.cause.name === 'TimeoutError';
          const retryAfter = failure.retryAfterMs;
          const giveUp =
            !failure.retryable ||
            attempt >= maxRetries ||
            (timedOut && timeouts++ >= 1) ||
            (retryAfter !== undefined && retryAfter > maxRetryAfterMs);
          options.log.warn({ attempt, status: failure.status, retryAfterMs: retryAfter, err: reason }, giveUp ? 'transcription failed' : 'transcription failed, retrying');
          if (giveUp) return { ok: false, reason: retryAfter !== undefined && retryAfter > maxRetryAfterMs ? `${reason} (asked to wait ${Math.ceil(retryAfter / 1000)} s)` : reason };
          await wait(Math.max(backoffDelay(attempt, backoff, random), retryAfter ?? 0), signal);
        }
      }
    },
  };
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message;
}
