/**
 * A multipart/form-data body (RFC 7578) built as bytes, for the transcription upload: the
 * global `FormData` and `File` are undici's and would load it (see client.ts). Encoded as the
 * WHATWG "multipart/form-data encoding algorithm" does: names and the file name with `"`, CR
 * and LF percent-escaped, field values with their line breaks as CRLF.
 */
import { randomBytes } from 'node:crypto';

export interface FilePart {
  readonly name: string;
  readonly filename: string;
  readonly type: string;
  readonly bytes: Uint8Array;
}

/** `fields` after `file`, in order; the content-type carries the boundary. */
export function multipartBody(file: FilePart, fields: ReadonlyArray<readonly [string, string]>): { readonly body: Buffer; readonly contentType: string } {
  const boundary = `----switchboard${randomBytes(16).toString('hex')}`;
  const parts: Buffer[] = [
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${escape(file.name)}"; filename="${escape(file.filename)}"\r\nContent-Type: ${file.type}\r\n\r\n`),
    Buffer.from(file.bytes.buffer, file.bytes.byteOffset, file.bytes.byteLength),
    Buffer.from('\r\n'),
  ];
  for (const [name, value] of fields) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${escape(name)}"\r\n\r\n${value.replace(/\r\n|\r|\n/g, '\r\n')}\r\n`));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

const escape = (name: string): string => name.replace(/\r/g, '%0D').replace(/\n/g, '%0A').replace(/"/g, '%22');
