import { CATALOG_LIMITS } from '@app/catalog';

export type UploadContentType = 'image/png' | 'image/jpeg' | 'image/webp' | 'image/gif';

export interface ImageType {
  contentType: UploadContentType;
  /** Extension given to the stored object; the local driver serves by extension. */
  extension: 'png' | 'jpg' | 'webp' | 'gif';
  /** sharp's name for the format, to check that sharp reads the file as the same thing. */
  sharpFormat: 'png' | 'jpeg' | 'webp' | 'gif';
}

/** The types the catalog publishes (GET /v1/models), each detected below by its magic bytes. */
export const ACCEPTED_UPLOAD_TYPES: readonly UploadContentType[] = CATALOG_LIMITS.upload.types;

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * The image type from the file's magic bytes alone (docs/api.md#uploads): the name and the
 * declared content type are client claims and are ignored. Null for anything else.
 */
export function detectImageType(body: Buffer): ImageType | null {
  if (body.length >= 8 && body.subarray(0, 8).equals(PNG_SIGNATURE)) {
    return { contentType: 'image/png', extension: 'png', sharpFormat: 'png' };
  }
  if (body.length >= 3 && body[0] === 0xff && body[1] === 0xd8 && body[2] === 0xff) {
    return { contentType: 'image/jpeg', extension: 'jpg', sharpFormat: 'jpeg' };
  }
  if (body.length >= 12 && ascii(body, 0, 4) === 'RIFF' && ascii(body, 8, 12) === 'WEBP') {
    return { contentType: 'image/webp', extension: 'webp', sharpFormat: 'webp' };
  }
  if (body.length >= 6 && (ascii(body, 0, 6) === 'GIF87a' || ascii(body, 0, 6) === 'GIF89a')) {
    return { contentType: 'image/gif', extension: 'gif', sharpFormat: 'gif' };
  }
  return null;
}

function ascii(body: Buffer, start: number, end: number): string {
  return body.toString('latin1', start, end);
}
