/**
 * Saves files people send into the workspace (`inbox/<channel>/<message id>/<name>`), so the
 * agent's file tools can open them. A file over the size limit is described, not downloaded;
 * a failed download is described with the reason. Neither fails the message.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { extname, join, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Attachment, AttachmentInput, AttachmentStore } from '../channel.ts';
import type { ImagePart } from '../provider.ts';

export interface AttachmentStoreOptions {
  /** Absolute path of the workspace. */
  readonly workspace: string;
  /** @default 20 MiB */
  readonly maxBytes?: number;
  /** Longest a download may take. @default 60000 */
  readonly timeoutMs?: number;
}

const extensions: Record<string, string> = {
  'image/jpeg': '.jpg',
  'image/png': '.png',
  'image/webp': '.webp',
  'image/gif': '.gif',
  'audio/ogg': '.ogg',
  'audio/mpeg': '.mp3',
  'video/mp4': '.mp4',
  'application/pdf': '.pdf',
  'text/plain': '.txt',
};

export function createAttachmentStore(options: AttachmentStoreOptions): AttachmentStore {
  const maxBytes = options.maxBytes ?? 20 * 1024 * 1024;
  return {
    maxBytes,
    async save(input: AttachmentInput): Promise<Attachment> {
      const name = safeName(input.name, input.kind, input.mime);
      const base = { kind: input.kind, name, ...(input.mime ? { mime: input.mime } : {}) };
      if (input.size !== undefined && input.size > maxBytes) {
        return { ...base, size: input.size, note: `not downloaded: ${megabytes(input.size)} is over the ${megabytes(maxBytes)} limit` };
      }
      const dir = join(options.workspace, 'inbox', safePart(input.channel), safePart(input.messageId));
      const file = join(dir, name);
      try {
        await mkdir(dir, { recursive: true });
        const data = await input.download(AbortSignal.timeout(options.timeoutMs ?? 60_000));
        const source = data instanceof Uint8Array ? Readable.from([data]) : Readable.from(data);
        let written = 0;
        source.on('data', (chunk: Uint8Array) => {
          written += chunk.length;
          if (written > maxBytes) source.destroy(new Error(`over the ${megabytes(maxBytes)} limit`));
        });
        await pipeline(source, createWriteStream(file));
        const size = (await stat(file)).size;
        return { ...base, size, path: relative(options.workspace, file) };
      } catch (error) {
        await rm(file, { force: true }).catch(() => undefined);
        // The model is told paths relative to the workspace; an error's absolute path is made so too.
        const reason = (error instanceof Error ? error.message : String(error)).replaceAll(`${options.workspace}${sep}`, '').replaceAll(options.workspace, '.');
        return { ...base, size: input.size ?? 0, note: `not saved: ${reason}` };
      }
    },
  };
}

const IMAGE_NAME = /\.(jpe?g|png|gif|webp|tiff?|avif|heic|heif|bmp)$/i;

/**
 * The saved photos and image files of a message, as workspace references for the model (see
 * ImagePart). A `file` counts when its MIME type or name says image; the bytes decide later
 * (src/media/image.ts sniffs them), so a mislabelled file gets a clear line, not a crash.
 */
export function imageParts(attachments: readonly Attachment[] | undefined): ImagePart[] {
  return (attachments ?? []).flatMap((a) =>
    a.path !== undefined && (a.kind === 'photo' || (a.kind === 'file' && (a.mime?.startsWith('image/') === true || IMAGE_NAME.test(a.name)))) ? [{ type: 'file' as const, path: a.path, name: a.name }] : [],
  );
}

const AUDIO_NAME = /\.(oga|ogg|opus|mp3|mpga|mpeg|m4a|aac|wav|flac|webm|weba)$/i;

/**
 * The saved voice notes and audio files of a message, to transcribe: kind `voice` or `audio`,
 * or a `file` whose MIME type or name says audio.
 */
export function audioAttachments(attachments: readonly Attachment[] | undefined): Attachment[] {
  return (attachments ?? []).filter(
    (a) => a.path !== undefined && (a.kind === 'voice' || a.kind === 'audio' || (a.kind === 'file' && (a.mime?.startsWith('audio/') === true || (a.mime?.startsWith('video/') !== true && AUDIO_NAME.test(a.name))))),
  );
}

/** How the model is told about a message's attachments (appended to the message text). */
export function describeAttachments(attachments: readonly Attachment[]): string {
  const lines = attachments.map((a) => {
    const what = [a.kind, a.mime, a.size > 0 ? megabytes(a.size) : undefined].filter(Boolean).join(', ');
    return a.path ? `- ${a.name} (${what}) saved at ${a.path}` : `- ${a.name} (${what}) ${a.note ?? 'not saved'}`;
  });
  return `[The person attached ${attachments.length === 1 ? 'a file' : `${attachments.length} files`}; paths are relative to your workspace]\n${lines.join('\n')}`;
}

function megabytes(bytes: number): string {
  return bytes < 1024 * 1024 ? `${Math.max(1, Math.round(bytes / 1024))} KB` : `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function safePart(part: string): string {
  return part.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_').slice(0, 80) || '_';
}

function safeName(name: string | undefined, kind: Attachment['kind'], mime: string | undefined): string {
  const cleaned = (name ?? '')
    .split(/[\\/]/)
    .pop()!
    // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
    .replace(/[\u0000-\u001f<>:"|?*]/g, '_')
    .slice(-120)
    // Leading dots and spaces together: " .." trimmed after the dots were taken would be "..".
    .replace(/^[\s.]+/, '')
    .trimEnd();
  if (cleaned !== '') return cleaned;
  return `${kind}${(mime && extensions[mime]) ?? (extname(name ?? '') || '.bin')}`;
}
