import sharp from 'sharp';

/** The builtin renderer's typeface; Pango finds it through fontconfig (fonts-dejavu-core). */
export const BUILTIN_FONT = 'DejaVu Sans';

const NARROW = 'iiiiiiiiiiii';
const WIDE = 'WWWWWWWWWWWW';

/**
 * Whether the builtin renderer's text comes out as letters rather than tofu (empty boxes).
 * Without a usable font (no fontconfig configuration, no font files) Pango draws every
 * character as a box of one width, so twelve i's come out as wide as twelve W's; with a real
 * proportional font the i's are less than half as wide.
 */
export async function builtinFontRenders(): Promise<{ ok: boolean; narrowPx: number; widePx: number }> {
  const width = async (text: string) =>
    (
      await sharp({ text: { text, font: `${BUILTIN_FONT} 24`, dpi: 72 } })
        .png()
        .toBuffer({ resolveWithObject: true })
    ).info.width;
  const [narrowPx, widePx] = await Promise.all([width(NARROW), width(WIDE)]);
  return { ok: narrowPx * 2 < widePx, narrowPx, widePx };
}
