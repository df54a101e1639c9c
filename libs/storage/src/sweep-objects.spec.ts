import { Logger } from '@nestjs/common';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import S3rver from 's3rver';
import { LocalStorageDriver } from './local.storage-driver';
import { MinioStorageDriver } from './minio.storage-driver';
import { StorageDriver } from './storage.driver';
import { newObjectKey, newObjectToken, resultObjectKey } from './storage.keys';
import { sweepUnreferenced } from './sweep-objects';

const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);

async function listed(driver: StorageDriver, prefix: 'results' | 'previews' | 'uploads'): Promise<string[]> {
  const keys: string[] = [];
  for await (const object of driver.list(prefix)) keys.push(object.key);
  return keys.sort();
}

// The same behaviour on both drivers: the local one on a temp directory, the MinIO one
// against a real S3-compatible server (s3rver, in-process).
describe.each([
  [
    'local',
    async () => {
      const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'kiln-sweep-'));
      const driver = new LocalStorageDriver({ dataDir, publicBaseUrl: 'http://localhost:8080' });
      return { driver, close: () => fs.rm(dataDir, { recursive: true, force: true }) };
    },
  ],
  [
    'minio',
    async () => {
      const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'kiln-sweep-s3rver-'));
      const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: [] });
      const { port } = await server.run();
      const driver = new MinioStorageDriver({
        endPoint: '127.0.0.1',
        port,
        useSSL: false,
        accessKey: 'S3RVER',
        secretKey: 'S3RVER',
        bucket: 'kiln-sweep',
        publicUrl: `http://127.0.0.1:${port}/kiln-sweep`,
      });
      return {
        driver,
        close: async () => {
          await server.close();
          await fs.rm(directory, { recursive: true, force: true });
        },
      };
    },
  ],
] as const)('%s driver: listing and sweeping unreferenced objects', (_name, make) => {
  let driver: StorageDriver;
  let close: () => Promise<unknown>;

  beforeAll(async () => {
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    ({ driver, close } = await make());
    await driver.init();
  });
  afterAll(async () => {
    await close?.();
    jest.restoreAllMocks();
  });

  it('lists every object under a prefix, and only those, with when it was written', async () => {
    const results = [resultObjectKey(newObjectToken(), 'abcdef12-0000', 1, 'png'), newObjectKey('results', 'image-2.png')];
    const upload = newObjectKey('uploads', 'ref.png');
    const before = Date.now();
    for (const key of [...results, upload]) await driver.put(key, png, 'image/png');

    expect(await listed(driver, 'results')).toEqual([...results].sort());
    expect(await listed(driver, 'uploads')).toEqual([upload]);
    expect(await listed(driver, 'previews')).toEqual([]);
    for await (const { lastModified } of driver.list('results')) {
      // S3 reports whole seconds.
      expect(lastModified.getTime()).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
      expect(lastModified.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    }
    for (const key of [...results, upload]) await driver.remove(key);
    expect(await listed(driver, 'results')).toEqual([]);
  });

  it('removes old unreferenced objects; keeps referenced ones, newer ones and other prefixes', async () => {
    const kept = resultObjectKey(newObjectToken(), 'abcdef12-0000', 1, 'png');
    const orphans = Array.from({ length: 5 }, (_, i) => resultObjectKey(newObjectToken(), 'abcdef12-0000', i + 2, 'png'));
    const preview = newObjectKey('previews', 'preview.webp');
    for (const key of [kept, ...orphans, preview]) await driver.put(key, png, 'image/png');
    const asked: string[][] = [];
    const referenced = (keys: string[]): Promise<Set<string>> => {
      asked.push(keys);
      return Promise.resolve(new Set(keys.filter((k) => k === kept)));
    };

    // Everything is newer than a cutoff in the past: nothing is even looked up.
    const past = new Date(Date.now() - 60_000);
    expect(await sweepUnreferenced(driver, { prefix: 'results', olderThan: past, referenced, chunk: 2 })).toBe(0);
    expect(asked).toEqual([]);

    const future = new Date(Date.now() + 5_000);
    expect(await sweepUnreferenced(driver, { prefix: 'results', olderThan: future, referenced, chunk: 2 })).toBe(5);
    // Looked up two at a time.
    expect(asked.flat().sort()).toEqual([kept, ...orphans].sort());
    expect(Math.max(...asked.map((keys) => keys.length))).toBe(2);
    expect(await listed(driver, 'results')).toEqual([kept]);
    expect(await driver.exists(kept)).toBe(true);
    expect(await driver.exists(preview)).toBe(true);

    // A second sweep finds nothing more to do.
    expect(await sweepUnreferenced(driver, { prefix: 'results', olderThan: future, referenced, chunk: 2 })).toBe(0);
    await driver.remove(kept);
    await driver.remove(preview);
  });

  it('overwriting a key counts as writing it: an object rewritten after the cutoff stays', async () => {
    const key = resultObjectKey(newObjectToken(), 'abcdef12-0000', 7, 'png');
    await driver.put(key, png, 'image/png');
    // S3 timestamps have a one-second resolution.
    await new Promise((r) => setTimeout(r, 1100));
    const cutoff = new Date();
    await new Promise((r) => setTimeout(r, 1100));
    await driver.put(key, Buffer.concat([png, png]), 'image/png');
    const none = (): Promise<Set<string>> => Promise.resolve(new Set<string>());
    expect(await sweepUnreferenced(driver, { prefix: 'results', olderThan: cutoff, referenced: none, chunk: 10 })).toBe(0);
    expect(await driver.exists(key)).toBe(true);
    await driver.remove(key);
  });
});
