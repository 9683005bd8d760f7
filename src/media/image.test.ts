import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { alphaPng, bombPng, cameraJpeg } from '../../test/support/photos.ts';
import { createImagePreparer, IMAGE_LIMITS, type ImageResult, type PreparedImage } from './image.ts';
import { sniffImage } from './sniff.ts';

function prepared(result: ImageResult): PreparedImage {
  assert.ok(result.ok, `expected an image, got: ${result.ok ? '' : result.reason}`);
  return result;
}

function refused(result: ImageResult): string {
  assert.ok(!result.ok, 'expected a refusal');
  assert.doesNotMatch(result.reason, /\n/, 'one line');
  return result.reason;
}

describe('sniffImage', () => {
  it('names the format from the bytes, whatever the name says', () => {
    assert.equal(sniffImage(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0]))?.mime, 'image/jpeg');
    assert.equal(sniffImage(Buffer.from('\x89PNG\r\n\x1a\n....', 'latin1'))?.format, 'png');
    assert.equal(sniffImage(Buffer.from('GIF89a......'))?.format, 'gif');
    assert.equal(sniffImage(Buffer.from('RIFF\0\0\0\0WEBPVP8 '))?.format, 'webp');
    assert.equal(sniffImage(Buffer.from('II*\0....'))?.format, 'tiff');
    assert.equal(sniffImage(Buffer.from('\0\0\0\x18ftypheic\0\0\0\0mif1heic', 'latin1'))?.format, 'heic');
    assert.equal(sniffImage(Buffer.from('\0\0\0\x1cftypavif\0\0\0\0avifmif1miaf', 'latin1'))?.format, 'avif');
    assert.equal(sniffImage(Buffer.from('\uFEFF<?xml version="1.0"?>\n<!-- x -->\n<svg xmlns="http://www.w3.org/2000/svg"/>'))?.format, 'svg');
    assert.equal(sniffImage(Buffer.from('%PDF-1.7\n')), undefined);
    assert.equal(sniffImage(Buffer.from('<html><body><svg></svg>')), undefined);
    assert.equal(sniffImage(new Uint8Array(0)), undefined);
  });
});

describe('image preparer', () => {
  it('downscales a camera photo to the provider\'s long edge, upright, as JPEG with no EXIF', async () => {
    const photo = await cameraJpeg(1600, 1200, { orientation: 6 });
    assert.ok((await sharp(photo).metadata()).exif, 'the test photo has EXIF');
    const preparer = createImagePreparer();
    const image = prepared(await preparer.prepare(photo, { ...IMAGE_LIMITS.anthropic, longEdge: 800 }));
    assert.equal(image.mime, 'image/jpeg');
    // Orientation 6: the stored 1600×1200 is shown rotated, 1200×1600 → 600×800.
    assert.deepEqual([image.width, image.height], [600, 800]);
    const meta = await sharp(image.data).metadata();
    assert.deepEqual([meta.format, meta.width, meta.height], ['jpeg', 600, 800]);
    assert.equal(meta.exif, undefined, 'no EXIF sent');
    assert.equal(meta.orientation, undefined);
    assert.equal(image.data.includes(Buffer.from('TestCam')), false);
    assert.equal(image.data.includes(Buffer.from('GPS 48.8584N')), false);
  });

  it('never upscales, keeps transparency and GIFs as PNG, and turns TIFF into JPEG', async () => {
    const preparer = createImagePreparer();
    const small = prepared(await preparer.prepare(await cameraJpeg(300, 200), IMAGE_LIMITS.openai));
    assert.deepEqual([small.width, small.height], [300, 200]);
    const png = prepared(await preparer.prepare(await alphaPng(3000, 1000), IMAGE_LIMITS.anthropic));
    assert.equal(png.mime, 'image/png');
    assert.deepEqual([png.width, png.height], [1568, 523]);
    assert.equal((await sharp(png.data).metadata()).hasAlpha, true);
    const gif = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#ff0000' } }).gif().toBuffer();
    assert.equal(prepared(await preparer.prepare(gif, IMAGE_LIMITS.gemini)).mime, 'image/png');
    const tiff = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#00ff00' } }).tiff().toBuffer();
    assert.equal(prepared(await preparer.prepare(tiff, IMAGE_LIMITS.openai)).mime, 'image/jpeg');
  });

  it('fits the byte limit by re-encoding smaller, or says it cannot', async () => {
    const preparer = createImagePreparer();
    const photo = await cameraJpeg(1600, 1200);
    const fitted = prepared(await preparer.prepare(photo, { ...IMAGE_LIMITS.openai, maxBytes: 60_000 }));
    assert.ok(fitted.data.length <= 60_000, `${fitted.data.length} bytes`);
    assert.match(refused(await preparer.prepare(photo, { ...IMAGE_LIMITS.openai, maxBytes: 300 })), /does not fit in 0\.0 MB/);
  });

  it('refuses a truncated photo, a decompression bomb, a non-image, SVG, HEIC and BMP with one clear line each', async () => {
    const preparer = createImagePreparer();
    const photo = await cameraJpeg(800, 600);
    assert.match(refused(await preparer.prepare(photo.subarray(0, photo.length >> 1), IMAGE_LIMITS.openai)), /damaged or cut short/);
    assert.match(refused(await preparer.prepare(bombPng(20_000, 20_000), IMAGE_LIMITS.openai)), /decompression bomb/);
    assert.match(refused(await createImagePreparer({ maxInputPixels: 1_000_000 }).prepare(bombPng(2000, 1000), IMAGE_LIMITS.openai)), /2000×1000 pixels|more than 1 MP/);
    assert.match(refused(await preparer.prepare(Buffer.from('%PDF-1.7\n%âãÏÓ\n1 0 obj'), IMAGE_LIMITS.openai)), /not an image/);
    assert.match(refused(await preparer.prepare(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="100000" height="100000"/>'), IMAGE_LIMITS.openai)), /SVG/);
    assert.match(refused(await preparer.prepare(Buffer.from('\0\0\0\x18ftypheic\0\0\0\0mif1heic', 'latin1'), IMAGE_LIMITS.openai)), /HEIC.*JPEG or PNG/);
    assert.match(refused(await preparer.prepare(Buffer.concat([Buffer.from('BM'), Buffer.alloc(60)]), IMAGE_LIMITS.openai)), /BMP/);
    // A header that sniffs as JPEG, then garbage.
    assert.match(refused(await preparer.prepare(Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(200, 7)]), IMAGE_LIMITS.openai)), /decoded|damaged/);
  });

  it('loads the image library on the first image only, and not for bytes refused before decoding', async () => {
    let loads = 0;
    const preparer = createImagePreparer({
      loadSharp: async () => {
        loads++;
        return sharp as never;
      },
    });
    assert.equal(preparer.loaded, false);
    await preparer.prepare(Buffer.from('not an image'), IMAGE_LIMITS.openai);
    await preparer.prepare(Buffer.from('<svg/>'), IMAGE_LIMITS.openai);
    assert.equal(loads, 0);
    const photo = await cameraJpeg(64, 48);
    await Promise.all([preparer.prepare(photo, IMAGE_LIMITS.openai), preparer.prepare(photo, IMAGE_LIMITS.gemini)]);
    assert.equal(loads, 1);
    assert.equal(preparer.loaded, true);
  });

  it('says so when the image library cannot be loaded, and tries again on the next image', async () => {
    let loads = 0;
    const preparer = createImagePreparer({
      loadSharp: async () => {
        loads++;
        throw new Error('Could not load the "sharp" module using the linux-x64 runtime');
      },
    });
    const photo = await cameraJpeg(64, 48);
    assert.match(refused(await preparer.prepare(photo, IMAGE_LIMITS.openai)), /image library \(sharp\) could not be loaded.*npm ci/);
    await preparer.prepare(photo, IMAGE_LIMITS.openai);
    assert.equal(loads, 2);
  });
});
