import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LocalStorageDriver, resolveLocalPath } from './local.storage-driver';
import { InvalidStorageKeyError, StorageObjectNotFoundError } from './storage.errors';
import { newObjectKey } from './storage.keys';

describe('LocalStorageDriver', () => {
  let dataDir: string;
  let driver: LocalStorageDriver;

  beforeEach(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'kiln-storage-'));
    driver = new LocalStorageDriver({ dataDir, publicBaseUrl: 'http://localhost:8080/' });
    await driver.init();
  });

  afterEach(async () => {
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('creates <dataDir>/files on init, and init is repeatable', async () => {
    expect((await fs.stat(path.join(dataDir, 'files'))).isDirectory()).toBe(true);
    await expect(driver.init()).resolves.toBeUndefined();
  });

  it('streams an object, and refuses a missing one before any stream exists', async () => {
    const key = newObjectKey('results', 'big.png');
    const body = Buffer.alloc(300 * 1024, 5);
    await driver.put(key, body, 'image/png');
    const chunks: Buffer[] = [];
    for await (const chunk of await driver.openRead(key)) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(body)).toBe(true);
    await expect(driver.openRead(newObjectKey('results', 'missing.png'))).rejects.toBeInstanceOf(StorageObjectNotFoundError);
    await expect(driver.openRead('results')).rejects.toBeInstanceOf(StorageObjectNotFoundError);
  });

  it('round-trips bytes under <dataDir>/files/<key>', async () => {
    const key = newObjectKey('uploads', 'photo.png');
    const body = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]);

    expect(await driver.exists(key)).toBe(false);
    await driver.put(key, body, 'image/png');
    expect(await driver.exists(key)).toBe(true);
    expect(await driver.get(key)).toEqual(body);
    expect(await fs.readFile(path.join(dataDir, 'files', key))).toEqual(body);

    const replacement = Buffer.from('second version');
    await driver.put(key, replacement, 'image/png');
    expect(await driver.get(key)).toEqual(replacement);

    await driver.remove(key);
    expect(await driver.exists(key)).toBe(false);
    await expect(driver.get(key)).rejects.toBeInstanceOf(StorageObjectNotFoundError);
    await expect(driver.remove(key)).resolves.toBeUndefined();
  });

  it('leaves no temp files behind and drops the empty per-object directory on remove', async () => {
    const key = newObjectKey('results', 'out.webp');
    await driver.put(key, Buffer.from('x'), 'image/webp');
    const objectDir = path.dirname(path.join(dataDir, 'files', key));
    expect(await fs.readdir(objectDir)).toEqual(['out.webp']);

    await driver.remove(key);
    await expect(fs.stat(objectDir)).rejects.toMatchObject({ code: 'ENOENT' });
    expect((await fs.stat(path.join(dataDir, 'files', 'results'))).isDirectory()).toBe(true);
  });

  it('handles concurrent puts of the same key without mixing bodies', async () => {
    const key = newObjectKey('uploads', 'same.bin');
    const bodies = Array.from({ length: 20 }, (_, i) => Buffer.alloc(64 * 1024, i));
    await Promise.all(bodies.map((body) => driver.put(key, body, 'application/octet-stream')));
    const stored = await driver.get(key);
    expect(bodies.some((body) => body.equals(stored))).toBe(true);
    expect(await fs.readdir(path.dirname(path.join(dataDir, 'files', key)))).toEqual(['same.bin']);
  });

  it('reports a clear not-found error carrying the key', async () => {
    await expect(driver.get('uploads/nothing/here.png')).rejects.toMatchObject({
      code: 'not_found',
      key: 'uploads/nothing/here.png',
      message: expect.stringContaining('uploads/nothing/here.png'),
    });
    await driver.put('uploads/dir/file', Buffer.from('x'), 'text/plain');
    await expect(driver.get('uploads/dir')).rejects.toBeInstanceOf(StorageObjectNotFoundError);
    expect(await driver.exists('uploads/dir')).toBe(false);
  });

  it.each(['../escape', '/etc/passwd', 'uploads/../../escape', 'uploads/a b', 'uploads/.x', 'uploads/a\\b'])(
    'refuses the key %j in every method',
    async (key) => {
      await expect(driver.put(key, Buffer.from('x'), 'text/plain')).rejects.toBeInstanceOf(InvalidStorageKeyError);
      await expect(driver.get(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
      await expect(driver.exists(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
      await expect(driver.remove(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
      expect(() => driver.publicUrl(key)).toThrow(InvalidStorageKeyError);
      expect(driver.resolveLocalPath(key)).toBeNull();
    },
  );

  it('writes nothing outside <dataDir>/files for a traversal attempt', async () => {
    await expect(driver.put('../../outside', Buffer.from('x'), 'text/plain')).rejects.toThrow();
    expect(await fs.readdir(dataDir)).toEqual(['files']);
  });

  it('resolves valid keys to absolute paths under <dataDir>/files', () => {
    const key = 'uploads/0123/a.png';
    const expected = path.join(dataDir, 'files', 'uploads', '0123', 'a.png');
    expect(driver.resolveLocalPath(key)).toBe(expected);
    expect(resolveLocalPath(dataDir, key)).toBe(expected);
    expect(path.isAbsolute(resolveLocalPath('relative/data', key)!)).toBe(true);
    expect(resolveLocalPath(dataDir, '')).toBeNull();
  });

  it('builds public URLs under <publicBaseUrl>/files and inverts them', () => {
    const key = newObjectKey('previews', 'thumb.jpg');
    const url = driver.publicUrl(key);
    expect(url).toBe(`http://localhost:8080/files/${key}`);
    expect(driver.keyFromPublicUrl(url)).toBe(key);
    expect(driver.keyFromPublicUrl(`http://other:8080/files/${key}`)).toBeNull();
    expect(driver.keyFromPublicUrl(`http://localhost:8080/${key}`)).toBeNull();
    expect(driver.keyFromPublicUrl('http://localhost:8080/files/../../etc/passwd')).toBeNull();
  });
});
