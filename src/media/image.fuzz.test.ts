/**
 * Fuzzing the image path (bytes a person or a platform sends → what the model is given):
 * valid photos with bytes flipped, cut, spliced or replaced, and arbitrary bytes behind every
 * image signature we sniff. Each case either becomes a JPEG/PNG within the limits with no
 * metadata, or a one-line reason; it never throws and never hangs.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import fc from 'fast-check';
import sharp from 'sharp';
import { alphaPng, cameraJpeg } from '../../test/support/photos.ts';
import { fuzzAsync } from '../../test/support/fuzz.ts';
import { createImagePreparer, type ImageLimits, type ImageResult } from './image.ts';
import { sniffImage } from './sniff.ts';

const limits: ImageLimits = { longEdge: 256, maxBytes: 200_000, maxImages: 4, maxTotalBytes: 1_000_000 };

const signatures = [
  [0xff, 0xd8, 0xff],
  [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
  [...Buffer.from('GIF89a')],
  [...Buffer.from('RIFF\0\0\0\0WEBPVP8 ', 'latin1')],
  [...Buffer.from('II*\0')],
  [...Buffer.from('MM\0*')],
  [...Buffer.from('\0\0\0\x1cftypavif\0\0\0\0avifmif1', 'latin1')],
];

async function check(result: ImageResult): Promise<void> {
  if (!result.ok) {
    assert.equal(typeof result.reason, 'string');
    assert.ok(result.reason.length > 0 && !result.reason.includes('\n'), `one line: ${JSON.stringify(result.reason)}`);
    return;
  }
  assert.ok(result.mime === 'image/jpeg' || result.mime === 'image/png');
  assert.ok(result.data.length <= limits.maxBytes);
  assert.ok(Math.max(result.width, result.height) <= limits.longEdge);
  const meta = await sharp(result.data).metadata();
  assert.equal(meta.exif, undefined);
  assert.equal(sniffImage(result.data)?.mime, result.mime);
}

describe('image preparer (fuzz)', () => {
  const seeds: Buffer[] = [];
  before(async () => {
    seeds.push(await cameraJpeg(320, 240, { orientation: 6 }), await alphaPng(300, 200));
    seeds.push(await sharp({ create: { width: 40, height: 40, channels: 3, background: '#123456' } }).gif().toBuffer());
    seeds.push(await sharp({ create: { width: 50, height: 30, channels: 3, background: '#654321' } }).webp().toBuffer());
    seeds.push(await sharp({ create: { width: 50, height: 30, channels: 3, background: '#abcdef' } }).tiff().toBuffer());
  });

  it('mutated photos: an image within the limits or one line, never a throw', async (t) => {
    const preparer = createImagePreparer({ maxInputPixels: 4_000_000, timeoutMs: 5000 });
    const mutation = fc.record({
      seed: fc.nat(),
      flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 12 }),
      cut: fc.option(fc.nat(), { nil: undefined }),
      splice: fc.option(fc.uint8Array({ maxLength: 64 }), { nil: undefined }),
    });
    await fuzzAsync(
      t,
      'image bytes (mutated)',
      mutation,
      async ({ seed, flips, cut, splice }) => {
        const bytes = Buffer.from(seeds[seed % seeds.length]!);
        for (const [at, value] of flips) bytes[at % bytes.length] = value;
        let input: Buffer = cut === undefined ? bytes : bytes.subarray(0, cut % bytes.length);
        if (splice) input = Buffer.concat([input.subarray(0, input.length >> 1), splice, input.subarray(input.length >> 1)]);
        await check(await preparer.prepare(input, limits));
      },
      { runs: 60 },
    );
  });

  it('arbitrary bytes behind every image signature: one line, never a throw', async (t) => {
    const preparer = createImagePreparer({ maxInputPixels: 4_000_000, timeoutMs: 5000 });
    await fuzzAsync(
      t,
      'image bytes (signature + noise)',
      fc.tuple(fc.constantFrom(...signatures), fc.uint8Array({ maxLength: 512 })),
      async ([signature, rest]) => check(await preparer.prepare(Buffer.concat([Buffer.from(signature), rest]), limits)),
      { runs: 80 },
    );
  });
});
