import { Controller, Get, Param, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { notFound } from '@app/errors';
import { LocalStorageDriver, StorageDriver } from '@app/storage';

// Every stored object has a fresh random key, so its bytes never change under one URL.
const ONE_YEAR_MS = 365 * 24 * 60 * 60 * 1000;

/**
 * Public, unauthenticated downloads of uploads, results and previews at
 * `<PUBLIC_BASE_URL>/files/<key>` when the local driver stores them. With MinIO the URLs point
 * at the bucket, so this route answers 404. Outside /v1 (see UNVERSIONED_PATHS).
 */
@ApiExcludeController()
@Controller('files')
export class FilesController {
  constructor(private readonly storage: StorageDriver) {}

  @Get('*path')
  async download(@Param('path') path: string[] | string, @Res() res: Response): Promise<void> {
    const key = Array.isArray(path) ? path.join('/') : path;
    // findLocalFile refuses any key that is not newObjectKey-shaped (dot segments, empty
    // segments, odd characters), so nothing outside <dataDir>/files is reachable.
    const file = this.storage instanceof LocalStorageDriver ? await this.storage.findLocalFile(key) : null;
    if (!file) throw notFound('File');
    try {
      await new Promise<void>((resolve, reject) =>
        res.sendFile(
          file,
          {
            maxAge: ONE_YEAR_MS,
            immutable: true,
            // Keys never have dot segments (findLocalFile refuses them); 'deny' would also
            // refuse a DATA_DIR that happens to sit under a dot directory such as ~/.kiln.
            dotfiles: 'allow',
            headers: {
              'X-Content-Type-Options': 'nosniff',
              // Uploaded bytes are only ever images; never let them run as a document.
              'Content-Security-Policy': "default-src 'none'; sandbox",
            },
          },
          (error?: Error) => (error ? reject(error) : resolve()),
        ),
      );
    } catch (error) {
      // Client went away mid-stream: nothing left to answer.
      if (res.headersSent) return;
      if (isMissing(error)) throw notFound('File');
      throw error;
    }
  }
}

const MISSING_CODES = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'ENAMETOOLONG']);

/** send's errors for a path that names no readable file (a directory counts as missing). */
function isMissing(error: unknown): boolean {
  const { status, statusCode, code } = error as { status?: number; statusCode?: number; code?: string };
  return status === 404 || statusCode === 404 || (code !== undefined && MISSING_CODES.has(code));
}
