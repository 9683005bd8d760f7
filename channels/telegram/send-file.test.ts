import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ImageHeader } from '../../src/media/dimensions.ts';
import { PHOTO_LIMITS, uploadMethod } from './index.ts';

const image = (format: ImageHeader['format'], width: number, height: number): ImageHeader => ({ format, mime: `image/${format}`, width, height });

describe('uploadMethod (how send_file sends a file to Telegram)', () => {
  it('sends a JPEG or PNG within sendPhoto’s limits as a photo, at the limits included', () => {
    assert.equal(uploadMethod(image('png', 64, 48), 1000), 'sendPhoto');
    assert.equal(uploadMethod(image('jpeg', 4000, 3000), PHOTO_LIMITS.maxBytes), 'sendPhoto');
    assert.equal(uploadMethod(image('png', 5000, 5000), 1000), 'sendPhoto'); // width + height = 10000
    assert.equal(uploadMethod(image('png', 2000, 100), 1000), 'sendPhoto'); // 20:1
    assert.equal(uploadMethod(image('png', 100, 2000), 1000), 'sendPhoto'); // 1:20
  });

  it('sends an image over the limits as a document', () => {
    assert.equal(uploadMethod(image('jpeg', 4000, 3000), PHOTO_LIMITS.maxBytes + 1), 'sendDocument');
    assert.equal(uploadMethod(image('png', 5001, 5000), 1000), 'sendDocument');
    assert.equal(uploadMethod(image('png', 2001, 100), 1000), 'sendDocument');
    assert.equal(uploadMethod(image('png', 100, 2001), 1000), 'sendDocument');
  });

  it('sends a GIF as an animation, WebP and anything that is not an image as a document', () => {
    assert.equal(uploadMethod(image('gif', 30, 20), 1000), 'sendAnimation');
    assert.equal(uploadMethod(image('webp', 30, 20), 1000), 'sendDocument');
    assert.equal(uploadMethod(undefined, 1000), 'sendDocument');
  });
});
