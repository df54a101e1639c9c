import { CATALOG_LIMITS } from '@app/catalog';

/**
 * Upload limits. Bytes, count and types are those of docs/api.md#limits-and-plans;
 * the pixel caps are Kiln's own guard against decompression bombs: a small file whose header
 * claims a huge canvas would otherwise cost gigabytes of memory in whoever decodes it.
 */
export const UPLOAD_LIMITS = {
  /** 10 MB each; a file of exactly this size is accepted. The catalog publishes it (GET /v1/models). */
  maxBytes: CATALOG_LIMITS.upload.maxBytes,
  maxFiles: CATALOG_LIMITS.upload.maxFiles,
  /** Pixels of one frame (width x height); consumers decode the first frame only. */
  maxPixels: 50_000_000,
  /** Per side, so a 1 x 50,000,000 strip is refused too. */
  maxDimension: 16_384,
} as const;
