import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { nameForImage, readImageHeader } from './dimensions.ts';

const blank = (width: number, height: number) => sharp({ create: { width, height, channels: 3, background: { r: 10, g: 200, b: 30 } } });

describe('readImageHeader', () => {
  it('reads the size of PNG, JPEG, GIF and WebP (lossy, lossless, extended) like sharp does', async () => {
    const cases: Array<[string, Buffer, number, number]> = [
      ['png', await blank(300, 17).png().toBuffer(), 300, 17],
      ['jpeg', await blank(640, 481).jpeg().toBuffer(), 640, 481],
      ['jpeg', await blank(33, 2000).withMetadata({ orientation: 6 }).jpeg({ progressive: true }).toBuffer(), 33, 2000],
      ['gif', await blank(70, 9).gif().toBuffer(), 70, 9],
      ['webp', await blank(1001, 3).webp().toBuffer(), 1001, 3],
      ['webp', await blank(77, 88).webp({ lossless: true }).toBuffer(), 77, 88],
      ['webp', await sharp({ create: { width: 123, height: 45, channels: 4, background: { r: 1, g: 2, b: 3, alpha: 0.5 } } }).webp().toBuffer(), 123, 45],
    ];
    for (const [format, bytes, width, height] of cases) {
      assert.deepEqual(readImageHeader(bytes), { format, mime: `image/${format}`, width, height }, `${format} ${width}x${height}`);
    }
  });

  it('is undefined for what is not an image, a header cut short, or an image kind it does not measure', async () => {
    assert.equal(readImageHeader(new TextEncoder().encode('%PDF-1.4\n%âãÏÓ\n')), undefined);
    assert.equal(readImageHeader((await blank(10, 10).png().toBuffer()).subarray(0, 20)), undefined);
    assert.equal(readImageHeader((await blank(10, 10).jpeg().toBuffer()).subarray(0, 30)), undefined);
    assert.equal(readImageHeader(new TextEncoder().encode('<svg xmlns="http://www.w3.org/2000/svg"/>')), undefined);
    assert.equal(readImageHeader(new Uint8Array(0)), undefined);
  });
});

describe('nameForImage', () => {
  it('adds the real extension when the name has another or none', () => {
    const png = { format: 'png', mime: 'image/png', width: 1, height: 1 } as const;
    const jpeg = { format: 'jpeg', mime: 'image/jpeg', width: 1, height: 1 } as const;
    assert.equal(nameForImage('chart.png', png), 'chart.png');
    assert.equal(nameForImage('chart.PNG', png), 'chart.PNG');
    assert.equal(nameForImage('chart', png), 'chart.png');
    assert.equal(nameForImage('chart.txt', png), 'chart.txt.png');
    assert.equal(nameForImage('photo.jpeg', jpeg), 'photo.jpeg');
    assert.equal(nameForImage('photo', jpeg), 'photo.jpg');
  });
});
