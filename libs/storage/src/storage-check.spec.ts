import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createServer, Server } from 'node:net';
import { LocalStorageDriver } from './local.storage-driver';
import { MinioStorageDriver } from './minio.storage-driver';

/** StorageDriver.check, behind /readyz: a failure says where it looked. */
describe('storage readiness checks', () => {
  it('local: passes on a writable directory, names the directory when it is missing', async () => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'kiln-check-'));
    try {
      const driver = new LocalStorageDriver({ dataDir, publicBaseUrl: 'http://localhost:8080' });
      await driver.init();
      await expect(driver.check(1000)).resolves.toBeUndefined();
      await fs.rm(path.join(dataDir, 'files'), { recursive: true });
      await expect(driver.check(1000)).rejects.toThrow(`Storage directory ${path.join(dataDir, 'files')} is not writable (ENOENT)`);
    } finally {
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });

  const minio = (port: number) =>
    new MinioStorageDriver({
      endPoint: '127.0.0.1',
      port,
      useSSL: false,
      accessKey: 'k',
      secretKey: 's',
      bucket: 'kiln-b',
      publicUrl: 'http://x/kiln-b',
    });

  it('minio: a refused connection names the endpoint and the bucket', async () => {
    // A port that was just free: nothing listens on it.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise((resolve) => server.close(resolve));
    await expect(minio(port).check(2000)).rejects.toThrow(`Bucket "kiln-b" at http://127.0.0.1:${port} cannot be reached`);
  });

  it('minio: a server that never answers fails within the timeout', async () => {
    const sockets: import('node:net').Socket[] = [];
    const server: Server = createServer((s) => sockets.push(s));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      await expect(minio(port).check(300)).rejects.toThrow(/cannot be reached: Timeout: no answer within 300 ms/);
    } finally {
      sockets.forEach((s) => s.destroy());
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
