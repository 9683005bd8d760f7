/**
 * Test photos: a camera-like JPEG (texture, EXIF naming the camera and a position, an
 * orientation tag), a PNG with transparency, and a decompression bomb built by hand.
 */
import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';

/** Raw RGB pixels with texture (so JPEG sizes are like a photo's, not a flat colour's). */
function texture(width: number, height: number): Buffer {
  const pixels = Buffer.allocUnsafe(width * height * 3);
  let state = 0x9e3779b9;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      const grain = state & 0x1f;
      const at = (y * width + x) * 3;
      pixels[at] = ((x * 255) / width + grain) & 0xff;
      pixels[at + 1] = ((y * 255) / height + grain) & 0xff;
      pixels[at + 2] = (((x + y) * 128) / (width + height) + grain * 2) & 0xff;
    }
  }
  return pixels;
}

/** A photo of `width`×`height` with camera EXIF (orientation 6 = "rotate 90° clockwise to view"). */
export function cameraJpeg(width: number, height: number, options: { orientation?: number; quality?: number } = {}): Promise<Buffer> {
  return sharp(texture(width, height), { raw: { width, height, channels: 3 } })
    .withExif({ IFD0: { Make: 'TestCam', Model: 'Serial 12345', ImageDescription: 'GPS 48.8584N 2.2945E' } })
    .withMetadata({ orientation: options.orientation ?? 1 })
    .jpeg({ quality: options.quality ?? 92 })
    .toBuffer();
}

/** A PNG with an alpha channel (a screenshot with transparency). */
export function alphaPng(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 4, background: { r: 20, g: 120, b: 200, alpha: 0.5 } } }).png().toBuffer();
}

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/**
 * A PNG (RFC 2083 / ISO 15948: signature, IHDR, IDAT, IEND) that declares `width`×`height`
 * RGB pixels but carries a few KB: what a decompression bomb looks like to a decoder.
 */
export function bombPng(width: number, height: number): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit, truecolour, deflate, adaptive filtering, no interlace
  const rows = deflateSync(Buffer.alloc((width * 3 + 1) * Math.min(height, 64)));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', header), chunk('IDAT', rows), chunk('IEND', Buffer.alloc(0))]);
}

/** The pixel size of an image as a platform's media server probes it (upright), or undefined when it does not decode. */
export async function imageDimensions(data: Uint8Array): Promise<{ width: number; height: number } | undefined> {
  try {
    const meta = await sharp(data).metadata();
    const { width, height } = meta.autoOrient ?? meta;
    return width && height ? { width, height } : undefined;
  } catch {
    return undefined;
  }
}
