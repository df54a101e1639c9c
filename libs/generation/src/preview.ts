import sharp from 'sharp';

/** Longer side of a batch's preview thumbnail. */
export const PREVIEW_EDGE = 256;

/** A small WebP of a result (transparency kept), for lists and dashboards. */
export async function makePreview(image: Buffer): Promise<Buffer> {
  return sharp(image)
    .resize(PREVIEW_EDGE, PREVIEW_EDGE, { fit: 'inside', withoutEnlargement: true })
    .webp({ quality: 80, effort: 2 })
    .toBuffer();
}
