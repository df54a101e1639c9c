import { CallHandler, ExecutionContext, Inject, Injectable, NestInterceptor } from '@nestjs/common';
import type { Request, RequestHandler, Response } from 'express';
import multer, { MulterError } from 'multer';
import { promises as fs } from 'node:fs';
import { Observable } from 'rxjs';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode, invalidRequest, KilnError } from '@app/errors';
import { UPLOAD_LIMITS, uploadDisplayName, uploadRefusals } from '@app/uploads';

export const UPLOAD_FIELD = 'file';

/**
 * Where multipart files wait on disk while their request is handled: UPLOAD_TMP_DIR, by
 * default `<DATA_DIR>/incoming` (a tmpfs in containers, whose root may be read-only).
 */
export function incomingDir(config: KilnConfig): string {
  return config.storage.uploadTmpDir;
}

/**
 * Parses `multipart/form-data` with a repeated `file` field into `req.files`, and turns every
 * multer/busboy failure into Kiln's error object. Nest's FilesInterceptor would turn them into
 * HttpExceptions and lose which file and why (docs/api.md#validation-order, docs/api.md#uploads). Runs after the guards,
 * so an unauthenticated body is never parsed.
 *
 * Files stream to temp files under incomingDir, not into memory: a request may carry 20 files
 * of 10 MB, and UploadsService reads them one at a time. multer removes them when the parse
 * fails; this interceptor removes them once the response is over, whatever happened.
 */
@Injectable()
export class UploadFilesInterceptor implements NestInterceptor {
  private readonly parse: RequestHandler;

  constructor(@Inject(KILN_CONFIG) config: KilnConfig) {
    this.parse = multer({
      // A string destination is created on first use; file names are random.
      storage: multer.diskStorage({ destination: incomingDir(config) }),
      // Clients (curl, browsers) send UTF-8 file names without a charset parameter.
      defParamCharset: 'utf8',
      limits: {
        // multer treats these as "max allowed": a file of exactly maxBytes passes.
        fileSize: UPLOAD_LIMITS.maxBytes,
        // Text fields are not part of the interface: the first one aborts the parse.
        fields: 0,
        // Backstops; .array() below refuses the 21st file first, naming it.
        files: UPLOAD_LIMITS.maxFiles + 1,
        parts: UPLOAD_LIMITS.maxFiles + 1,
        fieldNameSize: 100,
        headerPairs: 100,
      },
    }).array(UPLOAD_FIELD, UPLOAD_LIMITS.maxFiles);
  }

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const http = context.switchToHttp();
    const req = http.getRequest<Request>();
    const res = http.getResponse<Response>();
    if (!req.is('multipart/form-data')) {
      throw invalidRequest('body', 'not_multipart', 'Send the files as multipart/form-data in a repeated field named "file"');
    }
    res.once('close', () => void removeTempFiles(req));
    await new Promise<void>((resolve, reject) =>
      this.parse(req, res, (error?: unknown) => (error ? reject(toUploadError(error)) : resolve())),
    );
    return next.handle();
  }
}

async function removeTempFiles(req: Request): Promise<void> {
  const files = Array.isArray(req.files) ? req.files : [];
  await Promise.all(files.filter((f) => f.path).map((f) => fs.rm(f.path, { force: true }).catch(() => undefined)));
}

/** Maps multer's and busboy's errors to `invalid_request` with upload details. */
export function toUploadError(error: unknown): KilnError {
  if (error instanceof KilnError) return error;
  if (error instanceof MulterError) {
    // multer 2 names the client's file on file errors; @types/multer does not declare it yet.
    const filename = (error as MulterError & { filename?: string }).filename;
    const file = filename !== undefined ? uploadDisplayName(filename) : undefined;
    switch (error.code) {
      case 'LIMIT_FILE_SIZE':
        return uploadRefusals.tooLarge(file ?? 'file');
      case 'LIMIT_FILE_COUNT':
      case 'LIMIT_PART_COUNT':
        return uploadRefusals.tooManyFiles(file);
      case 'LIMIT_UNEXPECTED_FILE':
        // .array() reports a file past maxCount in the right field the same way as a wrong field.
        if (error.field === UPLOAD_FIELD) return uploadRefusals.tooManyFiles(file);
        return new KilnError(
          ErrorCode.InvalidRequest,
          `Unexpected file field "${error.field ?? ''}"; send files in a field named "${UPLOAD_FIELD}"`,
          { field: error.field ?? 'body', ...(file !== undefined ? { file } : {}), reason: 'unexpected_field' },
        );
      case 'LIMIT_FIELD_COUNT':
      case 'LIMIT_FIELD_KEY':
      case 'LIMIT_FIELD_VALUE':
        return invalidRequest(error.field ?? 'body', 'unknown_field', `Only file parts are accepted, in a field named "${UPLOAD_FIELD}"`);
      default:
        return invalidRequest('body', 'malformed_multipart', 'The multipart body could not be parsed');
    }
  }
  // busboy's own errors: missing boundary, truncated body, malformed part headers; or the
  // client going away mid-request.
  return invalidRequest('body', 'malformed_multipart', 'The multipart body could not be parsed');
}
