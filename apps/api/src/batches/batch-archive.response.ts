import type { Response } from 'express';
import { BatchArchive, BatchArchiveService } from '@app/batches';
import { ARCHIVE_JSON } from './dto/batch.response.dto';

/** Sends a batch's archive as the response: a zip download named after the batch. */
export async function sendArchive(archives: BatchArchiveService, archive: BatchArchive, res: Response): Promise<void> {
  res.status(200);
  res.setHeader('Content-Type', 'application/zip');
  res.setHeader('Content-Disposition', `attachment; filename="kiln-${archive.batch.id}.zip"`);
  await archives.write(archive, res, ARCHIVE_JSON);
}
