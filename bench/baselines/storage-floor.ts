import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import { LocalStorageDriver, newObjectToken, resolveLocalPath, resultObjectKey } from '@app/storage';
import { round } from '../lib/util';

export interface StorageFloorRun {
  images: number;
  wallSec: number;
  /** This process's CPU (user + system, every thread: libuv's pool does the file calls) per image. */
  msPerImage: number;
  userMsPerImage: number;
  systemMsPerImage: number;
}

/**
 * What storing a result costs by itself: `images` puts of the pipeline's own image through
 * Kiln's local driver (the embedded default the pipeline runs on), `concurrency` at once, with
 * the keys a task's result gets (`results/<token>/<name>`: a directory of its own per image,
 * which keeps public URLs unguessable; docs/api.md), on the same disk as the bench's Kiln. No
 * queue, no database: the part of a task's CPU that any design keeping a file per image on
 * this filesystem pays, measured in this process (nothing else runs in it meanwhile). The
 * caller removes `dataDir` after every run has been measured: removing 10,000 directories
 * leaves the filesystem work (ext4 frees them at its journal's commits) that was seen charged
 * to the next run's system time (0.11, 0.18, 0.29 ms per image for three runs in a row).
 */
export async function runStorageFloor(dataDir: string, image: Buffer, images: number, concurrency: number): Promise<StorageFloorRun> {
  const driver = new LocalStorageDriver({ dataDir, publicBaseUrl: 'http://127.0.0.1' });
  await driver.init();
  const batchId = randomUUID();
  let next = 0;
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < images; i = next++)
        await driver.put(resultObjectKey(newObjectToken(), batchId, i + 1, 'png'), image, 'image/png');
    }),
  );
  const wallSec = Number(process.hrtime.bigint() - started) / 1e9;
  const { user, system } = process.cpuUsage(cpu);
  return {
    images,
    wallSec: round(wallSec, 2),
    msPerImage: round((user + system) / 1000 / images, 3),
    userMsPerImage: round(user / 1000 / images, 3),
    systemMsPerImage: round(system / 1000 / images, 3),
  };
}

/**
 * The image Kiln stored for a task (`result_key`, under the local driver's files), to store
 * again in the floor. By key: a full run's results folder also holds the archive scenario's
 * 1 MiB images, and one of those once made the floor 1.0 ms an image instead of 0.1.
 */
export function storedResultImage(kilnDataDir: string, resultKey: string): Buffer {
  return fs.readFileSync(resolveLocalPath(kilnDataDir, resultKey)!);
}
