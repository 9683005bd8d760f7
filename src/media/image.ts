/**
 * Prepares an image a person sent for a vision model: the real format sniffed from the bytes,
 * turned upright (EXIF orientation applied), downscaled to the provider's limits, re-encoded as
 * JPEG or PNG (every provider takes both) with no metadata (no EXIF: no GPS position, no camera
 * serial), and refused with a one-line reason when it is not an image, damaged, or hostile.
 * Never throws for bad input: a reason is data for the model and the person.
 *
 * sharp (libvips, prebuilt in its npm packages) is imported on the first image, never at
 * start: a daemon that never receives a photo never loads it.
 */
import type { Sharp, SharpOptions } from 'sharp';
import { sniffImage } from './sniff.ts';

/**
 * What one provider takes. Sources, read 2026-11:
 * - OpenAI, https://platform.openai.com/docs/guides/images-vision ("Image input requirements":
 *   PNG, JPEG, WEBP, non-animated GIF; up to 50 MB total payload and 500 images per request;
 *   at detail "high" an image is first scaled to fit 2048×2048, so larger pixels are wasted).
 * - Anthropic, https://docs.anthropic.com/en/docs/build-with-claude/vision ("Evaluate image
 *   size": an image whose long edge is over 1568 px is scaled down first, so 1568 is what the
 *   model sees; "maximum of 5 MB per image" in the API — of base64, hence 3.75 MB of bytes;
 *   up to 100 images per API request; JPEG, PNG, GIF, WebP).
 * - Gemini, https://ai.google.dev/gemini-api/docs/image-understanding ("inline image data"
 *   for requests whose total size is under 20 MB; PNG, JPEG, WEBP, HEIC, HEIF; up to 3,600
 *   images per request) and Vertex AI's model table (7 MB per inline file). Gemini cuts a large
 *   image into 768×768 tiles of 258 tokens each (same page, "Technical details"): 1536 px is
 *   2×2 tiles, about the ~1,600 tokens Claude spends on its 1568 px, instead of 4×4 at 3072.
 */
export interface ImageLimits {
  /** Longest edge in pixels; larger images are scaled down (never up). */
  readonly longEdge: number;
  /** Most bytes of one encoded image (before base64, which adds a third). */
  readonly maxBytes: number;
  /** Most images in one request. */
  readonly maxImages: number;
  /** Most image bytes in one request, all images together (before base64). */
  readonly maxTotalBytes: number;
}

export type ProviderKind = 'openai' | 'anthropic' | 'gemini';

export const IMAGE_LIMITS: Readonly<Record<ProviderKind, ImageLimits>> = {
  openai: { longEdge: 2048, maxBytes: 10 * 1024 * 1024, maxImages: 500, maxTotalBytes: 36 * 1024 * 1024 },
  anthropic: { longEdge: 1568, maxBytes: 3.75 * 1024 * 1024, maxImages: 100, maxTotalBytes: 24 * 1024 * 1024 },
  gemini: { longEdge: 1536, maxBytes: 7 * 1024 * 1024, maxImages: 3600, maxTotalBytes: 14 * 1024 * 1024 },
};

export interface PreparedImage {
  readonly ok: true;
  readonly mime: 'image/jpeg' | 'image/png';
  readonly data: Buffer;
  readonly width: number;
  readonly height: number;
}

export interface ImageProblem {
  readonly ok: false;
  /** One line for the model and the person, e.g. "it is damaged or cut short". */
  readonly reason: string;
}

export type ImageResult = PreparedImage | ImageProblem;

export interface ImagePreparerOptions {
  /**
   * Images with more pixels are refused before decoding (a decompression bomb is a few KB of
   * PNG that claims 50 000 × 50 000 pixels). 120 MP keeps the 108 MP phone sensors in.
   * @default 120_000_000
   */
  readonly maxInputPixels?: number;
  /** Longest one decode may take. @default 20000 */
  readonly timeoutMs?: number;
  /** The image library; tests count how often it loads. @default () => import('sharp') */
  readonly loadSharp?: () => Promise<SharpFactory>;
}

type SharpFactory = (input: Buffer, options: SharpOptions) => Sharp;

export interface ImagePreparer {
  prepare(bytes: Uint8Array, limits: ImageLimits): Promise<ImageResult>;
  /** Whether the image library has been loaded (for the start-up figures). */
  readonly loaded: boolean;
}

const problem = (reason: string): ImageProblem => ({ ok: false, reason });

export function createImagePreparer(options: ImagePreparerOptions = {}): ImagePreparer {
  const maxInputPixels = options.maxInputPixels ?? 120_000_000;
  const timeoutSeconds = Math.max(1, Math.ceil((options.timeoutMs ?? 20_000) / 1000));
  const load =
    options.loadSharp ??
    (async () => {
      const { default: sharp } = await import('sharp');
      // libvips' operation cache (50 MB by default) helps a pipeline that repeats on one input;
      // photos are each decoded once (workspace-images.ts caches the results), so it would only
      // hold memory after each photo.
      sharp.cache(false);
      return sharp as unknown as SharpFactory;
    });
  let library: Promise<SharpFactory> | undefined;
  let loaded = false;
  const sharpOf = (): Promise<SharpFactory> =>
    (library ??= load().then((factory) => {
      loaded = true;
      return factory;
    }));

  return {
    get loaded() {
      return loaded;
    },
    async prepare(bytes, limits) {
      const sniffed = sniffImage(bytes);
      if (!sniffed) return problem('its contents are not an image (not JPEG, PNG, GIF, WebP, TIFF or AVIF, whatever its name or type says)');
      switch (sniffed.format) {
        case 'svg':
          // SVG is XML: decoding it means an XML parser and a renderer on untrusted input, with
          // sizes the file itself declares. It is text, so the model can read it with file_read.
          return problem('it is an SVG drawing, which is not rendered for the model; it is text, so read the file instead');
        case 'heic':
          return problem('it is HEIC, which the bundled image library cannot decode (no HEVC decoder in sharp\'s prebuilt libvips); ask for it as JPEG or PNG');
        case 'bmp':
        case 'ico':
          return problem(`it is ${sniffed.format.toUpperCase()}, which the bundled image library cannot decode; ask for it as JPEG or PNG`);
      }
      let sharp: SharpFactory;
      try {
        sharp = await sharpOf();
      } catch (error) {
        library = undefined;
        return problem(`the image library (sharp) could not be loaded: ${firstLine(error)}; reinstall the package (npm ci)`);
      }
      const input = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      // failOn 'warning' is what sharp's docs advise for untrusted input; autoOrient applies
      // the EXIF orientation before the metadata is dropped (sharp keeps none unless asked).
      const open = (): Sharp => sharp(input, { failOn: 'warning', limitInputPixels: maxInputPixels, autoOrient: true, sequentialRead: true }).timeout({ seconds: timeoutSeconds });
      try {
        const meta = await open().metadata();
        const width = meta.autoOrient?.width ?? meta.width ?? 0;
        const height = meta.autoOrient?.height ?? meta.height ?? 0;
        if (width * height > maxInputPixels) return bomb(width, height, maxInputPixels);
        const lossless = sniffed.format !== 'jpeg' && (meta.hasAlpha === true || sniffed.format === 'png' || sniffed.format === 'gif');
        let edge = Math.min(limits.longEdge, Math.max(width, height));
        for (let attempt = 0; attempt < 4; attempt++) {
          const pipeline = open().resize({ width: edge, height: edge, fit: 'inside', withoutEnlargement: true });
          const usePng = lossless && attempt === 0;
          // Plain libjpeg-turbo: mozjpeg's trellis search saves ~10 % of bytes for ~3× the time.
          const encoded = usePng ? pipeline.png({ compressionLevel: 6 }) : (meta.hasAlpha ? pipeline.flatten({ background: '#ffffff' }) : pipeline).jpeg({ quality: attempt < 2 ? 85 : 75 });
          const { data, info } = await encoded.toBuffer({ resolveWithObject: true });
          if (data.length <= limits.maxBytes) return { ok: true, mime: usePng ? 'image/png' : 'image/jpeg', data, width: info.width, height: info.height };
          if (!usePng) edge = Math.max(64, Math.round(edge * 0.7));
        }
        return problem(`it does not fit in ${megabytes(limits.maxBytes)} even when scaled down`);
      } catch (error) {
        return problem(decodeFailure(error, maxInputPixels));
      }
    },
  };
}

function bomb(width: number, height: number, max: number): ImageProblem {
  return problem(`it claims ${width}×${height} pixels (${Math.round((width * height) / 1e6)} MP), over the ${Math.round(max / 1e6)} MP limit; refused as a possible decompression bomb`);
}

function decodeFailure(error: unknown, max: number): string {
  const message = firstLine(error);
  if (/pixel limit/i.test(message)) return `it has more than ${Math.round(max / 1e6)} MP; refused as a possible decompression bomb`;
  if (/timeout/i.test(message)) return 'decoding it took too long; refused';
  if (/premature end|truncat|unexpected end|not enough data|end of (file|stream|data)/i.test(message)) return `it is damaged or cut short (${message})`;
  return `it could not be decoded (${message})`;
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!.slice(0, 160);
}

function megabytes(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
