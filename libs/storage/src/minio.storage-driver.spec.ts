import { Logger } from '@nestjs/common';
import { Client } from 'minio';
import { promises as fs } from 'node:fs';
import { AddressInfo, createServer, Socket } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import S3rver from 's3rver';
import { MinioStorageDriver, MinioStorageOptions } from './minio.storage-driver';
import { InvalidStorageKeyError, StorageObjectNotFoundError } from './storage.errors';
import { newObjectKey } from './storage.keys';

// A real S3-compatible server (s3rver, in-process, on a random port) rather than a mocked
// client: what matters is that the driver's requests are ones an S3 server accepts.
describe('MinioStorageDriver against s3rver', () => {
  let directory: string;
  let server: S3rver;
  let options: MinioStorageOptions;
  let admin: Client;

  beforeAll(async () => {
    directory = await fs.mkdtemp(path.join(os.tmpdir(), 'kiln-s3rver-'));
    server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: [] });
    const { port } = await server.run();
    options = {
      endPoint: '127.0.0.1',
      port,
      useSSL: false,
      accessKey: 'S3RVER',
      secretKey: 'S3RVER',
      bucket: 'kiln-test',
      publicUrl: `http://127.0.0.1:${port}/kiln-test`,
    };
    admin = new Client({ ...options, pathStyle: true });
  });

  afterAll(async () => {
    await server?.close();
    await fs.rm(directory, { recursive: true, force: true });
  });

  let warn: jest.SpyInstance;
  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => warn.mockRestore());

  it('creates the bucket when missing; init is repeatable', async () => {
    expect(await admin.bucketExists(options.bucket)).toBe(false);
    const driver = new MinioStorageDriver(options);
    await driver.init();
    expect(await admin.bucketExists(options.bucket)).toBe(true);
    await expect(driver.init()).resolves.toBeUndefined();
    // s3rver answers PUT ?policy with NotImplemented; the driver tolerates exactly that.
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('does not implement bucket policies'));
  });

  it('tolerates two processes creating the same bucket at once', async () => {
    const bucket = 'kiln-race';
    const drivers = [1, 2, 3].map(() => new MinioStorageDriver({ ...options, bucket, publicUrl: `${options.publicUrl}-race` }));
    await Promise.all(drivers.map((driver) => driver.init()));
    expect(await admin.bucketExists(bucket)).toBe(true);
  });

  it('puts, gets, checks and removes objects', async () => {
    const driver = new MinioStorageDriver(options);
    await driver.init();
    const key = newObjectKey('results', 'out.png');
    const body = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47]), Buffer.alloc(256 * 1024, 7)]);

    expect(await driver.exists(key)).toBe(false);
    await driver.put(key, body, 'image/png');
    expect(await driver.exists(key)).toBe(true);
    expect((await driver.get(key)).equals(body)).toBe(true);
    expect((await admin.statObject(options.bucket, key)).metaData['content-type']).toBe('image/png');

    const chunks: Buffer[] = [];
    for await (const chunk of await driver.openRead(key)) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(body)).toBe(true);

    await driver.remove(key);
    expect(await driver.exists(key)).toBe(false);
    await expect(driver.openRead(key)).rejects.toBeInstanceOf(StorageObjectNotFoundError);
    await expect(driver.get(key)).rejects.toBeInstanceOf(StorageObjectNotFoundError);
    await expect(driver.get(key)).rejects.toMatchObject({ code: 'not_found', key });
    await expect(driver.remove(key)).resolves.toBeUndefined();
  });

  it('serves publicUrl(key) to an anonymous plain HTTP GET', async () => {
    const driver = new MinioStorageDriver(options);
    await driver.init();
    const key = newObjectKey('uploads', 'ref image.webp');
    const body = Buffer.from('RIFF....WEBPVP8 fake bytes');
    await driver.put(key, body, 'image/webp');

    const url = driver.publicUrl(key);
    expect(url).toBe(`${options.publicUrl}/${key}`);
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('image/webp');
    expect(Buffer.from(await response.arrayBuffer()).equals(body)).toBe(true);
  });

  it('inverts publicUrl and rejects foreign URLs', () => {
    const driver = new MinioStorageDriver({ ...options, publicUrl: 'https://cdn.example.com/kiln/' });
    const key = newObjectKey('previews', 'p.jpg');
    const url = driver.publicUrl(key);
    expect(url).toBe(`https://cdn.example.com/kiln/${key}`);
    expect(driver.keyFromPublicUrl(url)).toBe(key);
    expect(driver.keyFromPublicUrl(`https://cdn.example.com/other/${key}`)).toBeNull();
    expect(driver.keyFromPublicUrl(`http://localhost:8080/files/${key}`)).toBeNull();
  });

  it('refuses invalid keys before any request', async () => {
    const driver = new MinioStorageDriver(options);
    await expect(driver.put('../x', Buffer.from('x'), 'text/plain')).rejects.toBeInstanceOf(InvalidStorageKeyError);
    await expect(driver.get('/abs')).rejects.toBeInstanceOf(InvalidStorageKeyError);
    await expect(driver.exists('a b')).rejects.toBeInstanceOf(InvalidStorageKeyError);
    await expect(driver.remove('a/../b')).rejects.toBeInstanceOf(InvalidStorageKeyError);
  });

  it('does not swallow real failures such as bad credentials', async () => {
    const driver = new MinioStorageDriver({ ...options, bucket: 'kiln-denied', accessKey: 'WRONG' });
    await expect(driver.init()).rejects.toMatchObject({
      code: 'InvalidAccessKeyId',
      // An operator reading the log learns where: the endpoint and the bucket.
      message: expect.stringMatching(/^Bucket "kiln-denied" at http:\/\/127\.0\.0\.1:\d+ cannot be set up: InvalidAccessKeyId/),
    });
  });

  it('a store that accepts connections and never answers: every call fails within its timeout instead of hanging', async () => {
    // The frozen store: connections are accepted (the kernel does that) and nothing is ever sent back.
    const held = new Set<Socket>();
    const silent = createServer((socket) => {
      held.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as AddressInfo).port;
    try {
      const driver = new MinioStorageDriver({ ...options, port, publicUrl: `http://127.0.0.1:${port}/kiln-test`, timeoutMs: 300 });
      const key = newObjectKey('results', 'png');
      for (const call of [
        () => driver.put(key, Buffer.from('x'), 'image/png'),
        () => driver.get(key),
        () => driver.exists(key),
        () => driver.remove(key),
      ]) {
        const started = performance.now();
        await expect(call()).rejects.toMatchObject({ code: 'ETIMEDOUT' });
        // One attempt, or the client's own single retry: bounded either way.
        expect(performance.now() - started).toBeLessThan(2_000);
      }
      expect(held.size).toBeGreaterThan(0);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});
