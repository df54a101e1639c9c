import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { CONTENT_TYPE_OF, ImageProvider, ProviderError, RenderQuality, RenderRequest, RenderResult } from '../render.types';
import { reportProgress, throwIfAborted } from '../provider.utils';

/** Far above any catalog size (21:9 at 4K would be 6256 px wide); guards against a typo costing gigabytes. */
const MAX_EDGE = 8192;
/** Long prompts are shown abbreviated: the picture is a placeholder, not a transcript. */
const MAX_SHOWN_PROMPT_CHARS = 400;
import { BUILTIN_FONT as FONT } from './builtin-fonts';
const LABEL = 'Kiln builtin renderer';

/** PNG is lossless, so "quality" can only mean how hard the encoder works on the file size. */
const COMPRESSION_LEVEL: Record<RenderQuality, number> = { low: 1, medium: 3, auto: 6, high: 9 };
const DEFAULT_COMPRESSION_LEVEL = 6;

interface Layer {
  input: Buffer;
  raw: { width: number; height: number; channels: 4 };
  left: number;
  top: number;
}

interface Box {
  left: number;
  top: number;
  width: number;
  height: number;
}

/**
 * Renders locally with sharp (no network), so every model works offline. The image is real
 * and exactly the requested size, deterministic for (prompt, seed): colours and shapes come
 * from a hash of both, the prompt is printed on it, the references appear as a strip of
 * thumbnails, and a label says it is a local placeholder rather than a generated picture.
 */
export class BuiltinProvider implements ImageProvider {
  async render(req: RenderRequest): Promise<RenderResult> {
    const { width, height } = req;
    if (!isEdge(width) || !isEdge(height)) {
      throw new ProviderError('bad_request', `Image size ${width}x${height} is outside what the builtin renderer draws`);
    }
    const background = parseBackground(req.background);
    throwIfAborted(req.signal);

    const random = seededRandom(req.prompt, req.seed);
    const short = Math.min(width, height);
    const margin = Math.max(8, Math.round(short * 0.03));
    const gap = Math.max(4, Math.round(short * 0.015));
    const pad = Math.max(6, Math.round(short * 0.02));

    const labelFontPx = Math.max(10, Math.round(short / 48));
    const labelPromise = renderText(`${LABEL} · seed ${req.seed} · ${width}×${height}`, {
      fontPx: labelFontPx,
      maxWidth: width - 2 * margin - 2 * pad,
      maxHeight: Math.round(labelFontPx * 1.6),
      align: 'left',
    });
    const strip = req.references.length > 0 ? layoutStrip(req.references.length, width, height, margin, gap) : null;
    const thumbsPromise = strip ? renderThumbnails(req.references, strip.size) : Promise.resolve([]);
    // Awaited below, after the label; until then a rejection must not count as unhandled.
    thumbsPromise.catch(() => undefined);

    const label = await labelPromise;
    const labelPanel: Box = { left: margin, top: margin, width: label.width + 2 * pad, height: label.height + 2 * pad };
    const promptTop = labelPanel.top + labelPanel.height + gap;
    const promptBottom = strip ? strip.top - gap : height - margin;
    const promptMaxWidth = Math.round(width * 0.8) - 2 * pad;
    const promptMaxHeight = Math.max(1, promptBottom - promptTop - 2 * pad);
    const [prompt, thumbs] = await Promise.all([
      renderText(promptForDisplay(req.prompt), {
        fontPx: Math.max(12, Math.round(Math.sqrt(width * height) / 22)),
        maxWidth: promptMaxWidth,
        maxHeight: promptMaxHeight,
        align: 'centre',
      }),
      thumbsPromise,
    ]);
    reportProgress(req.onProgress, 30);
    throwIfAborted(req.signal);

    const promptPanel: Box = {
      width: prompt.width + 2 * pad,
      height: prompt.height + 2 * pad,
      left: Math.round((width - prompt.width) / 2) - pad,
      top: Math.round(promptTop + (promptBottom - promptTop - prompt.height) / 2) - pad,
    };
    const svg = backgroundSvg(width, height, background, random, [labelPanel, promptPanel], Math.round(pad * 0.8));
    const layers: Layer[] = [
      layer(label, labelPanel.left + pad, labelPanel.top + pad),
      layer(prompt, promptPanel.left + pad, promptPanel.top + pad),
      ...thumbs.map((thumb, i) => layer(thumb, strip!.cellLeft(i), strip!.cellTop(i))),
    ];

    let pipeline = sharp(Buffer.from(svg)).composite(layers);
    // librsvg always yields RGBA; an opaque picture needs no alpha channel in the file.
    if (background.kind !== 'transparent') pipeline = pipeline.removeAlpha();
    const format = req.outputFormat ?? 'png';
    if (format === 'jpeg') pipeline = pipeline.flatten({ background: '#ffffff' }).jpeg({ quality: 90 });
    else if (format === 'webp') pipeline = pipeline.webp({ quality: 90 });
    else pipeline = pipeline.png({ compressionLevel: req.quality ? COMPRESSION_LEVEL[req.quality] : DEFAULT_COMPRESSION_LEVEL });
    const data = await pipeline.toBuffer();
    // The remainder of the bar belongs to the caller, which still has to store the file.
    reportProgress(req.onProgress, 70);
    return { data, contentType: CONTENT_TYPE_OF[format], width, height };
  }
}

function isEdge(n: number): boolean {
  return Number.isInteger(n) && n >= 16 && n <= MAX_EDGE;
}

type Background = { kind: 'auto' } | { kind: 'transparent' } | { kind: 'colour'; colour: string };

function parseBackground(value: string | null): Background {
  if (value === null) return { kind: 'auto' };
  if (value === 'transparent') return { kind: 'transparent' };
  if (/^#[0-9a-fA-F]{6}$/.test(value)) return { kind: 'colour', colour: value.toUpperCase() };
  throw new ProviderError('bad_request', `Background must be "transparent" or a #RRGGBB colour, not "${value.slice(0, 20)}"`);
}

/** sfc32 seeded from SHA-256(seed, prompt): the same pair always draws the same picture. */
function seededRandom(prompt: string, seed: number): () => number {
  const hash = createHash('sha256').update(`${seed}\n${prompt}`, 'utf8').digest();
  let a = hash.readUInt32LE(0);
  let b = hash.readUInt32LE(4);
  let c = hash.readUInt32LE(8);
  let d = hash.readUInt32LE(12);
  return () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
}

function hsl(h: number, s: number, l: number, a = 1): string {
  const hue = ((h % 360) + 360) % 360;
  return a === 1 ? `hsl(${hue.toFixed(1)},${s}%,${l}%)` : `hsla(${hue.toFixed(1)},${s}%,${l}%,${a.toFixed(2)})`;
}

/**
 * Shapes stay within the central area (centres 20-80%, size at most 18% of the short edge),
 * so the corners always show the plain background: a transparent request really is
 * transparent there, and a colour request shows exactly that colour.
 */
function backgroundSvg(
  width: number,
  height: number,
  background: Background,
  random: () => number,
  panels: Box[],
  panelRadius: number,
): string {
  const short = Math.min(width, height);
  const baseHue = random() * 360;
  const parts: string[] = [];
  if (background.kind === 'auto') {
    const angle = random() * Math.PI * 2;
    const x = (0.5 + Math.cos(angle) / 2).toFixed(3);
    const y = (0.5 + Math.sin(angle) / 2).toFixed(3);
    const x2 = (0.5 - Math.cos(angle) / 2).toFixed(3);
    const y2 = (0.5 - Math.sin(angle) / 2).toFixed(3);
    parts.push(
      `<defs><linearGradient id="g" x1="${x}" y1="${y}" x2="${x2}" y2="${y2}">` +
        `<stop offset="0" stop-color="${hsl(baseHue, 55, 38)}"/>` +
        `<stop offset="1" stop-color="${hsl(baseHue + 90 + random() * 180, 60, 55)}"/>` +
        `</linearGradient></defs><rect width="${width}" height="${height}" fill="url(#g)"/>`,
    );
  } else if (background.kind === 'colour') {
    parts.push(`<rect width="${width}" height="${height}" fill="${background.colour}"/>`);
  }
  const shapeCount = 3 + Math.floor(random() * 3);
  for (let i = 0; i < shapeCount; i++) {
    const cx = width * (0.2 + random() * 0.6);
    const cy = height * (0.2 + random() * 0.6);
    const r = short * (0.06 + random() * 0.12);
    const fill = hsl(baseHue + 30 + random() * 300, 65, 45 + random() * 30, 0.3 + random() * 0.35);
    const kind = Math.floor(random() * 3);
    if (kind === 0) {
      parts.push(`<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="${r.toFixed(1)}" fill="${fill}"/>`);
    } else if (kind === 1) {
      const rotate = (random() * 90).toFixed(1);
      parts.push(
        `<rect x="${(cx - r).toFixed(1)}" y="${(cy - r).toFixed(1)}" width="${(2 * r).toFixed(1)}" height="${(2 * r).toFixed(1)}" ` +
          `rx="${(r * 0.2).toFixed(1)}" fill="${fill}" transform="rotate(${rotate} ${cx.toFixed(1)} ${cy.toFixed(1)})"/>`,
      );
    } else {
      const points = [0, 1, 2]
        .map((k) => {
          const a = (k * 2 * Math.PI) / 3 + random();
          return `${(cx + r * Math.cos(a)).toFixed(1)},${(cy + r * Math.sin(a)).toFixed(1)}`;
        })
        .join(' ');
      parts.push(`<polygon points="${points}" fill="${fill}"/>`);
    }
  }
  // Dark translucent panels keep white text legible on any background, light or transparent.
  for (const p of panels) {
    parts.push(
      `<rect x="${p.left}" y="${p.top}" width="${p.width}" height="${p.height}" rx="${panelRadius}" fill="#000000" fill-opacity="0.55"/>`,
    );
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${parts.join('')}</svg>`;
}

function promptForDisplay(prompt: string): string {
  // NUL ends the string on the C side and other control characters render as boxes.
  // eslint-disable-next-line no-control-regex -- control characters are exactly what this replaces
  const cleaned = prompt.replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g, ' ').trim();
  if (cleaned.length === 0) return '(empty prompt)';
  if (cleaned.length <= MAX_SHOWN_PROMPT_CHARS) return cleaned;
  return `${cleaned.slice(0, MAX_SHOWN_PROMPT_CHARS).trimEnd()}…`;
}

/** sharp's text input is always parsed as Pango markup, so the prompt must be escaped. */
function escapePango(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

interface RawImage {
  data: Buffer;
  width: number;
  height: number;
}

async function renderText(
  text: string,
  opts: { fontPx: number; maxWidth: number; maxHeight: number; align: 'left' | 'centre' },
): Promise<RawImage> {
  const maxWidth = Math.max(1, Math.floor(opts.maxWidth));
  const maxHeight = Math.max(1, Math.floor(opts.maxHeight));
  const markup = `<span foreground="#FFFFFF">${escapePango(text)}</span>`;
  const base = { text: markup, font: FONT, width: maxWidth, align: opts.align, wrap: 'word-char' as const, rgba: true };
  let out = await sharp({ text: { ...base, font: `${FONT} ${opts.fontPx}`, dpi: 72 } })
    .raw()
    .toBuffer({ resolveWithObject: true });
  if (out.info.height > maxHeight) {
    // Too long at the preferred size: let Pango pick the largest size that fits the box.
    out = await sharp({ text: { ...base, height: maxHeight } })
      .raw()
      .toBuffer({ resolveWithObject: true });
  }
  if (out.info.width > maxWidth || out.info.height > maxHeight) {
    out = await sharp(out.data, { raw: { width: out.info.width, height: out.info.height, channels: 4 } })
      .resize(maxWidth, maxHeight, { fit: 'inside' })
      .raw()
      .toBuffer({ resolveWithObject: true });
  }
  return { data: out.data, width: out.info.width, height: out.info.height };
}

interface Strip {
  size: number;
  top: number;
  cellLeft(i: number): number;
  cellTop(i: number): number;
}

/** The largest square thumbnails that fit n references into a centred grid along the bottom. */
function layoutStrip(n: number, width: number, height: number, margin: number, gap: number): Strip {
  const maxWidth = width * 0.84;
  const maxHeight = height * 0.22;
  let best = { size: 0, cols: n, rows: 1 };
  for (let rows = 1; rows <= n; rows++) {
    const cols = Math.ceil(n / rows);
    const size = Math.floor(Math.min((maxWidth - (cols - 1) * gap) / cols, (maxHeight - (rows - 1) * gap) / rows));
    if (size > best.size) best = { size, cols, rows };
  }
  const size = Math.max(8, best.size);
  const rowsUsed = Math.ceil(n / best.cols);
  const gridWidth = best.cols * size + (best.cols - 1) * gap;
  const gridHeight = rowsUsed * size + (rowsUsed - 1) * gap;
  const left = Math.round((width - gridWidth) / 2);
  const top = height - margin - gridHeight;
  return {
    size,
    top,
    cellLeft: (i) => left + (i % best.cols) * (size + gap),
    cellTop: (i) => top + Math.floor(i / best.cols) * (size + gap),
  };
}

async function renderThumbnails(references: RenderRequest['references'], size: number): Promise<RawImage[]> {
  const border = Math.max(1, Math.round(size / 40));
  const inner = Math.max(1, size - 2 * border);
  return Promise.all(
    references.map(async (ref, i) => {
      try {
        const out = await sharp(ref.data)
          .rotate() // honour EXIF orientation, as a viewer would
          .resize(inner, inner, { fit: 'cover' })
          .ensureAlpha()
          .extend({ top: border, bottom: border, left: border, right: border, background: '#FFFFFFFF' })
          .raw()
          .toBuffer({ resolveWithObject: true });
        return { data: out.data, width: out.info.width, height: out.info.height };
      } catch {
        throw new ProviderError('bad_request', `Reference image ${i + 1} could not be read as an image`);
      }
    }),
  );
}

function layer(image: RawImage, left: number, top: number): Layer {
  return { input: image.data, raw: { width: image.width, height: image.height, channels: 4 }, left, top };
}
