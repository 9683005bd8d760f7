/**
 * An outbound image's kind and size in pixels, read from its header without decoding it (no
 * sharp: sending a file must not load the image library). Channels use it to send an image
 * the way the platform shows photos inline (Telegram sendPhoto within its limits, Matrix
 * `m.image` with `info.w` / `info.h`).
 *
 * Header layouts followed:
 * - PNG: the IHDR chunk comes first; width and height are its first two 4-byte big-endian
 *   fields (PNG spec, W3C 3rd ed., §11.2.2 "IHDR Image header").
 * - GIF: the Logical Screen Descriptor after the 6-byte signature, width and height 16-bit
 *   little-endian (GIF89a spec §18).
 * - JPEG: the first SOFn segment (0xFFC0–0xFFCF except C4, C8, CC): precision (1 byte), height,
 *   width (16-bit big-endian) (ITU-T T.81, B.2.2 "Frame header syntax").
 * - WebP: "VP8 " (14-bit width/height after the 3-byte start code 9D 01 2A), "VP8L" (14-bit
 *   width-1 / height-1 packed after the 0x2F signature) and "VP8X" (24-bit canvas width-1 /
 *   height-1) (RFC 9649, §2.5, §3.2 and §2.7).
 */
import { open } from 'node:fs/promises';
import { sniffImage, type ImageFormat } from './sniff.ts';

export interface ImageHeader {
  readonly format: ImageFormat;
  readonly mime: string;
  readonly width: number;
  readonly height: number;
}

/** The format and pixel size of a JPEG, PNG, GIF or WebP from its first bytes; undefined for anything else or a header cut short. */
export function readImageHeader(bytes: Uint8Array): ImageHeader | undefined {
  const sniffed = sniffImage(bytes);
  if (!sniffed) return undefined;
  const size = sizeOf(sniffed.format, bytes);
  if (!size || size.width <= 0 || size.height <= 0) return undefined;
  return { ...sniffed, ...size };
}

type Size = { width: number; height: number } | undefined;

function sizeOf(format: ImageFormat, bytes: Uint8Array): Size {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (format) {
    case 'png':
      return bytes.length >= 24 ? { width: view.getUint32(16), height: view.getUint32(20) } : undefined;
    case 'gif':
      return bytes.length >= 10 ? { width: view.getUint16(6, true), height: view.getUint16(8, true) } : undefined;
    case 'jpeg':
      return jpegSize(bytes, view);
    case 'webp':
      return webpSize(bytes, view);
    default:
      return undefined;
  }
}

function jpegSize(bytes: Uint8Array, view: DataView): Size {
  let at = 2;
  while (at + 9 <= bytes.length) {
    if (bytes[at] !== 0xff) return undefined;
    const marker = bytes[at + 1]!;
    if (marker === 0xff) {
      at++; // fill byte
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2; // markers without a length
      continue;
    }
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: view.getUint16(at + 5), width: view.getUint16(at + 7) };
    }
    at += 2 + view.getUint16(at + 2);
  }
  return undefined;
}

function webpSize(bytes: Uint8Array, view: DataView): Size {
  const chunk = String.fromCharCode(...bytes.subarray(12, 16));
  if (chunk === 'VP8 ' && bytes.length >= 30 && bytes[23] === 0x9d && bytes[24] === 0x01 && bytes[25] === 0x2a) {
    return { width: view.getUint16(26, true) & 0x3fff, height: view.getUint16(28, true) & 0x3fff };
  }
  if (chunk === 'VP8L' && bytes.length >= 25 && bytes[20] === 0x2f) {
    const bits = view.getUint32(21, true);
    return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  if (chunk === 'VP8X' && bytes.length >= 30) {
    const u24 = (at: number): number => bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16);
    return { width: u24(24) + 1, height: u24(27) + 1 };
  }
  return undefined;
}

/** The file name with the extension of its real format when it has another (or none): platforms pick inline display by the name. */
export function nameForImage(name: string, header: ImageHeader): string {
  const wanted = header.format === 'jpeg' ? ['.jpg', '.jpeg'] : [`.${header.format}`];
  const lower = name.toLowerCase();
  if (wanted.some((ext) => lower.endsWith(ext))) return name;
  return `${name}${wanted[0]}`;
}

/** Bytes read from a file to find its header: a JPEG's EXIF and other segments before the frame header fit in 64 KiB each. */
const HEAD_BYTES = 256 * 1024;

/** {@link readImageHeader} of a file on disk (its first 256 KiB); undefined when it cannot be read or is not a measurable image. */
export async function readImageHeaderOfFile(path: string): Promise<ImageHeader | undefined> {
  let handle;
  try {
    handle = await open(path, 'r');
    const buffer = Buffer.alloc(HEAD_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, HEAD_BYTES, 0);
    return readImageHeader(buffer.subarray(0, bytesRead));
  } catch {
    return undefined;
  } finally {
    await handle?.close();
  }
}
