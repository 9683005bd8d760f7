/**
 * What an image file really is, from its first bytes: the MIME type a platform or a person
 * declares is not trusted (a `.jpg` that is a PDF, a "photo" that is HTML). Signatures from
 * the WHATWG MIME Sniffing Standard, §6.1 "Matching an image type pattern"
 * (https://mimesniff.spec.whatwg.org/#matching-an-image-type-pattern), plus TIFF (TIFF 6.0
 * §2 "Image File Header": "II*\0" / "MM\0*") and the ISO-BMFF `ftyp` brands of HEIF/AVIF
 * (ISO/IEC 23008-12 Annex B; AV1 Image File Format §9).
 */

export type ImageFormat = 'jpeg' | 'png' | 'gif' | 'webp' | 'bmp' | 'tiff' | 'avif' | 'heic' | 'svg' | 'ico';

export interface Sniffed {
  readonly format: ImageFormat;
  readonly mime: string;
}

const MIME: Readonly<Record<ImageFormat, string>> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  gif: 'image/gif',
  webp: 'image/webp',
  bmp: 'image/bmp',
  tiff: 'image/tiff',
  avif: 'image/avif',
  heic: 'image/heic',
  svg: 'image/svg+xml',
  ico: 'image/x-icon',
};

const starts = (bytes: Uint8Array, signature: readonly number[], at = 0): boolean =>
  bytes.length >= at + signature.length && signature.every((byte, index) => bytes[at + index] === byte);

const ascii = (bytes: Uint8Array, from: number, to: number): string => String.fromCharCode(...bytes.subarray(from, Math.min(to, bytes.length)));

const HEIC_BRANDS = new Set(['heic', 'heix', 'heim', 'heis', 'hevc', 'hevx', 'mif1', 'msf1']);
const AVIF_BRANDS = new Set(['avif', 'avis']);

/** The image format of `bytes`, or undefined when they are not an image we know. */
export function sniffImage(bytes: Uint8Array): Sniffed | undefined {
  const format = formatOf(bytes);
  return format === undefined ? undefined : { format, mime: MIME[format] };
}

function formatOf(bytes: Uint8Array): ImageFormat | undefined {
  if (starts(bytes, [0xff, 0xd8, 0xff])) return 'jpeg';
  if (starts(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'png';
  if (ascii(bytes, 0, 6) === 'GIF87a' || ascii(bytes, 0, 6) === 'GIF89a') return 'gif';
  if (ascii(bytes, 0, 4) === 'RIFF' && ascii(bytes, 8, 14) === 'WEBPVP') return 'webp';
  if (starts(bytes, [0x42, 0x4d]) && bytes.length >= 14) return 'bmp';
  if (starts(bytes, [0x49, 0x49, 0x2a, 0x00]) || starts(bytes, [0x4d, 0x4d, 0x00, 0x2a])) return 'tiff';
  if (starts(bytes, [0x00, 0x00, 0x01, 0x00]) && bytes.length >= 6) return 'ico';
  if (ascii(bytes, 4, 8) === 'ftyp') return isoBrand(bytes);
  return looksLikeSvg(bytes) ? 'svg' : undefined;
}

/** The major brand and compatible brands of an ISO-BMFF `ftyp` box. */
function isoBrand(bytes: Uint8Array): ImageFormat | undefined {
  const size = ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
  const end = Math.min(bytes.length, Math.max(16, Math.min(size, 256)));
  const brands = [ascii(bytes, 8, 12)];
  for (let at = 16; at + 4 <= end; at += 4) brands.push(ascii(bytes, at, at + 4));
  if (brands.some((brand) => AVIF_BRANDS.has(brand))) return 'avif';
  if (brands.some((brand) => HEIC_BRANDS.has(brand))) return 'heic';
  return undefined;
}

/** Text that opens (after a BOM, whitespace, an XML declaration, comments or a doctype) with `<svg`. */
function looksLikeSvg(bytes: Uint8Array): boolean {
  const head = new TextDecoder('utf-8', { fatal: false }).decode(bytes.subarray(0, 1024)).replace(/^\uFEFF/, '');
  return /^\s*(<\?xml[^>]*>\s*)?(<!--[\s\S]*?-->\s*|<!DOCTYPE[^>]*>\s*)*<svg[\s>]/i.test(head);
}
