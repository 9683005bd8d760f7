/**
 * Encrypted attachments (spec: client-server API, "Sending encrypted attachments";
 * matrix-org/matrix-spec data/event-schemas/schema/core-event-schema/… EncryptedFile): in an
 * encrypted room a file's bytes are encrypted with AES-256-CTR under a fresh key before the
 * upload, and the event (itself encrypted) carries `file` — the mxc URL, the key as a JWK, the
 * IV and the SHA-256 of the ciphertext — instead of `url`. A download is checked against that
 * hash before its bytes are trusted. Node's own crypto: the Rust engine does not do media.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/** An EncryptedFile without its url (known after the upload). */
export interface EncryptedFileKeys {
  readonly key: { readonly kty: 'oct'; readonly key_ops: readonly string[]; readonly alg: 'A256CTR'; readonly k: string; readonly ext: true };
  readonly iv: string;
  readonly hashes: { readonly sha256: string };
  readonly v: 'v2';
}

export interface EncryptedFile extends EncryptedFileKeys {
  readonly url: string;
}

const unpadded = (bytes: Buffer): string => bytes.toString('base64').replace(/=+$/, '');
const fromBase64 = (text: string): Buffer => Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');

/** Encrypts a file's bytes for an encrypted room: the ciphertext to upload, and the keys for the event. */
export function encryptAttachment(data: Uint8Array): { readonly data: Buffer; readonly keys: EncryptedFileKeys } {
  const key = randomBytes(32);
  // The spec's IV: 64 random bits then a 64-bit counter starting at zero (some clients overflow otherwise).
  const iv = Buffer.concat([randomBytes(8), Buffer.alloc(8)]);
  const cipher = createCipheriv('aes-256-ctr', key, iv);
  const encrypted = Buffer.concat([cipher.update(data), cipher.final()]);
  return {
    data: encrypted,
    keys: {
      key: { kty: 'oct', key_ops: ['encrypt', 'decrypt'], alg: 'A256CTR', k: key.toString('base64url'), ext: true },
      iv: unpadded(iv),
      hashes: { sha256: unpadded(createHash('sha256').update(encrypted).digest()) },
      v: 'v2',
    },
  };
}

/** The EncryptedFile of an event's `file`, or undefined when it is not a usable one. */
export function parseEncryptedFile(value: unknown): EncryptedFile | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const file = value as Record<string, unknown>;
  const key = file.key as Record<string, unknown> | undefined;
  const hashes = file.hashes as Record<string, unknown> | undefined;
  if (typeof file.url !== 'string' || typeof file.iv !== 'string' || typeof key?.k !== 'string' || typeof hashes?.sha256 !== 'string') return undefined;
  if (key.alg !== undefined && key.alg !== 'A256CTR') return undefined;
  if (fromBase64(key.k).length !== 32 || fromBase64(file.iv).length !== 16) return undefined;
  return {
    url: file.url,
    key: { kty: 'oct', key_ops: ['encrypt', 'decrypt'], alg: 'A256CTR', k: key.k, ext: true },
    iv: file.iv,
    hashes: { sha256: hashes.sha256 },
    v: 'v2',
  };
}

/**
 * Decrypts a downloaded encrypted file as it streams; throws at the end (before the last bytes
 * are handed out) when the ciphertext is not the one the sender hashed.
 */
export async function* decryptAttachment(ciphertext: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, file: EncryptedFileKeys): AsyncIterable<Uint8Array> {
  const decipher = createDecipheriv('aes-256-ctr', fromBase64(file.key.k), fromBase64(file.iv));
  const hash = createHash('sha256');
  let held: Buffer | undefined;
  for await (const chunk of ciphertext) {
    hash.update(chunk);
    if (held && held.length > 0) yield held;
    held = decipher.update(chunk);
  }
  const tail = decipher.final();
  if (unpadded(hash.digest()) !== file.hashes.sha256.replace(/=+$/, '')) throw new Error('the encrypted file does not match its hash: not saved');
  const last = held ? Buffer.concat([held, tail]) : tail;
  if (last.length > 0) yield last;
}
