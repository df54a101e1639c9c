import { ErrorCode, KilnError } from '@app/errors';
import { ACCEPTED_UPLOAD_TYPES } from './image-type';
import { UPLOAD_LIMITS } from './upload.limits';

/** The reasons of docs/api.md#uploads, plus Kiln's decompression-bomb guard. */
export type UploadRefusalReason = 'too_large' | 'unsupported_type' | 'too_many_files' | 'no_files' | 'too_many_pixels';

/** Every upload refusal is `invalid_request` with `{ file, reason }` details (docs/api.md#uploads). */
export class UploadRefusedError extends KilnError {
  constructor(
    readonly reason: UploadRefusalReason,
    message: string,
    details: Record<string, unknown>,
  ) {
    super(ErrorCode.InvalidRequest, message, { ...details, reason });
    this.name = 'UploadRefusedError';
  }
}

export const uploadRefusals = {
  noFiles: () => new UploadRefusedError('no_files', 'Send at least one file in a multipart field named "file"', { field: 'file' }),

  tooManyFiles: (file?: string) =>
    new UploadRefusedError('too_many_files', `At most ${UPLOAD_LIMITS.maxFiles} files per request`, {
      field: 'file',
      ...(file !== undefined ? { file } : {}),
      max: UPLOAD_LIMITS.maxFiles,
    }),

  tooLarge: (file: string) =>
    new UploadRefusedError('too_large', `"${file}" is larger than ${UPLOAD_LIMITS.maxBytes} bytes`, {
      file,
      maxBytes: UPLOAD_LIMITS.maxBytes,
    }),

  unsupportedType: (file: string) =>
    new UploadRefusedError('unsupported_type', `"${file}" is not a readable PNG, JPEG, WebP or GIF image`, {
      file,
      accepted: [...ACCEPTED_UPLOAD_TYPES],
    }),

  tooManyPixels: (file: string, width: number, height: number) =>
    new UploadRefusedError(
      'too_many_pixels',
      `"${file}" is ${width}x${height}; the limit is ${UPLOAD_LIMITS.maxPixels} pixels and ${UPLOAD_LIMITS.maxDimension} per side`,
      { file, width, height, maxPixels: UPLOAD_LIMITS.maxPixels, maxDimension: UPLOAD_LIMITS.maxDimension },
    ),
};
