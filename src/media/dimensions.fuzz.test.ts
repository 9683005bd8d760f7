/**
 * Fuzzing the header reader that decides how an outbound file is sent: arbitrary bytes behind
 * every signature it measures, and real headers cut or with bytes replaced. It never throws,
 * and what it returns is a known format with positive integer sides.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import fc from 'fast-check';
import sharp from 'sharp';
import { fuzz } from '../../test/support/fuzz.ts';
import { readImageHeader } from './dimensions.ts';

const signatures = [
  [0xff, 0xd8, 0xff],
  [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
  [...Buffer.from('GIF89a')],
  [...Buffer.from('RIFF\0\0\0\0WEBPVP8 ', 'latin1')],
  [...Buffer.from('RIFF\0\0\0\0WEBPVP8L', 'latin1')],
  [...Buffer.from('RIFF\0\0\0\0WEBPVP8X', 'latin1')],
];

function valid(header: ReturnType<typeof readImageHeader>): void {
  if (header === undefined) return;
  assert.ok(['jpeg', 'png', 'gif', 'webp'].includes(header.format), header.format);
  assert.ok(Number.isInteger(header.width) && header.width > 0 && Number.isInteger(header.height) && header.height > 0, JSON.stringify(header));
}

describe('readImageHeader (fuzz)', () => {
  const real: Buffer[] = [];
  before(async () => {
    const base = sharp({ create: { width: 40, height: 30, channels: 3, background: { r: 9, g: 9, b: 9 } } });
    real.push(await base.clone().png().toBuffer(), await base.clone().jpeg().toBuffer(), await base.clone().gif().toBuffer(), await base.clone().webp().toBuffer(), await base.clone().webp({ lossless: true }).toBuffer());
  });

  it('never throws on arbitrary bytes behind an image signature', (t) => {
    fuzz(t, 'image header (signature + bytes)', fc.tuple(fc.constantFrom(...signatures), fc.uint8Array({ maxLength: 200 })), ([signature, rest]) => {
      valid(readImageHeader(new Uint8Array([...signature, ...rest])));
    }, { runs: 2000 });
  });

  it('never throws on real headers cut short or with bytes replaced', (t) => {
    const mutated = fc.tuple(fc.nat({ max: real.length - 1 }), fc.nat({ max: 400 }), fc.array(fc.tuple(fc.nat({ max: 400 }), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }));
    fuzz(t, 'image header (mutated)', mutated, ([which, cut, changes]) => {
      const bytes = new Uint8Array(real[which]!.subarray(0, Math.max(0, real[which]!.length - cut)));
      for (const [at, value] of changes) if (at < bytes.length) bytes[at] = value;
      valid(readImageHeader(bytes));
    }, { runs: 2000 });
  });
});
