/**
 * A line chart as a PNG file, with no dependency: pixels drawn into an RGB buffer, a 5×7
 * bitmap font for the axis figures and labels (digits, capitals and a little punctuation),
 * and the PNG written with node:zlib (deflate + crc32). For bench scripts only.
 */
import { crc32, deflateSync } from 'node:zlib';

type Rgb = readonly [number, number, number];

export interface Series {
  readonly name: string;
  readonly color: Rgb;
  readonly points: ReadonlyArray<readonly [number, number]>;
}

export interface Chart {
  readonly title: string;
  readonly xLabel: string;
  readonly series: readonly Series[];
  /** Vertical dashed lines, e.g. where sending stopped. */
  readonly marks?: ReadonlyArray<{ readonly x: number; readonly label: string }>;
  readonly width?: number;
  readonly height?: number;
}

// 5×7 glyphs, one string of 7 rows × 5 bits each (row-major, '1' = ink).
const GLYPHS: Record<string, string> = {
  '0': '01110100011001110101110011000101110', '1': '00100011000010000100001000010001110',
  '2': '01110100010000100010001000100011111', '3': '11111000100010000010000011000101110',
  '4': '00010001100101010010111110001000010', '5': '11111100001111000001000011000101110',
  '6': '00110010001000011110100011000101110', '7': '11111000010001000100010000100001000',
  '8': '01110100011000101110100011000101110', '9': '01110100011000101111000010001001100',
  A: '01110100011000111111100011000110001', B: '11110100011000111110100011000111110',
  C: '01110100011000010000100001000101110', D: '11100100101000110001100011001011100',
  E: '11111100001000011110100001000011111', F: '11111100001000011110100001000010000',
  G: '01110100011000010111100011000101111', H: '10001100011000111111100011000110001',
  I: '01110001000010000100001000010001110', J: '00111000100001000010000101001001100',
  K: '10001100101010011000101001001010001', L: '10000100001000010000100001000011111',
  M: '10001110111010110101100011000110001', N: '10001100011100110101100111000110001',
  O: '01110100011000110001100011000101110', P: '11110100011000111110100001000010000',
  Q: '01110100011000110001101011001001101', R: '11110100011000111110101001001010001',
  S: '01111100001000001110000010000111110', T: '11111001000010000100001000010000100',
  U: '10001100011000110001100011000101110', V: '10001100011000110001100010101000100',
  W: '10001100011000110101101011010101010', X: '10001100010101000100010101000110001',
  Y: '10001100010101000100001000010000100', Z: '11111000010001000100010001000011111',
  '.': '00000000000000000000000000110001100', ',': '00000000000000000000011000010001000',
  ':': '00000011000110000000011000110000000', '-': '00000000000000011111000000000000000',
  '+': '00000001000010011111001000010000000', '/': '00000000010001000100010001000000000',
  '%': '11000110010001000100010001001100011', '(': '00010001000100001000010000010000010',
  ')': '01000001000001000010000100010001000', ' ': '00000000000000000000000000000000000',
};

class Canvas {
  readonly pixels: Buffer;
  readonly width: number;
  readonly height: number;
  constructor(width: number, height: number) {
    this.width = width;
    this.height = height;
    this.pixels = Buffer.alloc(width * height * 3, 255);
  }

  set(x: number, y: number, [r, g, b]: Rgb): void {
    x = Math.round(x);
    y = Math.round(y);
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    const at = (y * this.width + x) * 3;
    this.pixels[at] = r;
    this.pixels[at + 1] = g;
    this.pixels[at + 2] = b;
  }

  /** A line, `thick` pixels wide, optionally dashed. */
  line(x0: number, y0: number, x1: number, y1: number, color: Rgb, thick = 1, dash = 0): void {
    const steps = Math.max(1, Math.ceil(Math.max(Math.abs(x1 - x0), Math.abs(y1 - y0))));
    for (let i = 0; i <= steps; i++) {
      if (dash > 0 && Math.floor(i / dash) % 2 === 1) continue;
      const x = x0 + ((x1 - x0) * i) / steps;
      const y = y0 + ((y1 - y0) * i) / steps;
      for (let dx = 0; dx < thick; dx++) for (let dy = 0; dy < thick; dy++) this.set(x + dx, y + dy, color);
    }
  }

  /** Text in the 5×7 font at `scale`; characters it lacks are drawn as blanks. */
  text(x: number, y: number, text: string, color: Rgb, scale = 2): void {
    for (const char of text.toUpperCase()) {
      const glyph = GLYPHS[char] ?? GLYPHS[' ']!;
      for (let row = 0; row < 7; row++) {
        for (let col = 0; col < 5; col++) {
          if (glyph[row * 5 + col] !== '1') continue;
          for (let sx = 0; sx < scale; sx++) for (let sy = 0; sy < scale; sy++) this.set(x + col * scale + sx, y + row * scale + sy, color);
        }
      }
      x += 6 * scale;
    }
  }

  png(): Buffer {
    const raw = Buffer.alloc((this.width * 3 + 1) * this.height);
    for (let y = 0; y < this.height; y++) this.pixels.copy(raw, y * (this.width * 3 + 1) + 1, y * this.width * 3, (y + 1) * this.width * 3);
    const chunk = (type: string, data: Buffer): Buffer => {
      const head = Buffer.alloc(8);
      head.writeUInt32BE(data.length, 0);
      head.write(type, 4, 'ascii');
      const crc = Buffer.alloc(4);
      crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
      return Buffer.concat([head, data, crc]);
    };
    const header = Buffer.alloc(13);
    header.writeUInt32BE(this.width, 0);
    header.writeUInt32BE(this.height, 4);
    header[8] = 8; // bit depth
    header[9] = 2; // truecolour RGB
    return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', header), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
  }
}

/** A step for axis ticks: 1, 2 or 5 × 10^n giving about `count` ticks over `span`. */
function niceStep(span: number, count: number): number {
  const raw = span / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= raw) ?? raw;
}

/** Draws `chart` and returns the PNG bytes. The y axis starts at 0. */
export function lineChartPng(chart: Chart): Buffer {
  const width = chart.width ?? 1200;
  const height = chart.height ?? 600;
  const canvas = new Canvas(width, height);
  const left = 90;
  const right = width - 30;
  const top = 60;
  const bottom = height - 70;
  const all = chart.series.flatMap((s) => s.points);
  const xMax = Math.max(1e-9, ...all.map(([x]) => x));
  const yMax = Math.max(1, ...all.map(([, y]) => y)) * 1.1;
  const px = (x: number): number => left + (x / xMax) * (right - left);
  const py = (y: number): number => bottom - (y / yMax) * (bottom - top);
  const ink: Rgb = [30, 30, 30];
  const grid: Rgb = [225, 225, 225];

  canvas.text(left, 18, chart.title, ink, 2);
  const yStep = niceStep(yMax, 8);
  for (let y = 0; y <= yMax; y += yStep) {
    canvas.line(left, py(y), right, py(y), grid);
    const label = String(Math.round(y));
    canvas.text(left - 10 - label.length * 12, py(y) - 7, label, ink, 2);
  }
  const xStep = niceStep(xMax, 10);
  for (let x = 0; x <= xMax + 1e-9; x += xStep) {
    canvas.line(px(x), top, px(x), bottom, grid);
    const label = xStep < 1 ? x.toFixed(1) : String(Math.round(x));
    canvas.text(px(x) - label.length * 6, bottom + 10, label, ink, 2);
  }
  canvas.text((left + right) / 2 - chart.xLabel.length * 6, bottom + 34, chart.xLabel, ink, 2);
  canvas.text(8, top - 24, 'MB', ink, 2);
  canvas.line(left, top, left, bottom, ink, 2);
  canvas.line(left, bottom, right, bottom, ink, 2);
  for (const mark of chart.marks ?? []) {
    canvas.line(px(mark.x), top, px(mark.x), bottom, [120, 120, 120], 1, 6);
    canvas.text(px(mark.x) + 6, top + 4, mark.label, [120, 120, 120], 2);
  }
  let legendX = right - chart.series.length * 130;
  for (const series of chart.series) {
    for (let i = 1; i < series.points.length; i++) {
      const [x0, y0] = series.points[i - 1]!;
      const [x1, y1] = series.points[i]!;
      canvas.line(px(x0), py(y0), px(x1), py(y1), series.color, 2);
    }
    canvas.line(legendX, top - 16, legendX + 24, top - 16, series.color, 3);
    canvas.text(legendX + 30, top - 23, series.name, series.color, 2);
    legendX += 130;
  }
  return canvas.png();
}
