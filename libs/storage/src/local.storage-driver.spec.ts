import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LocalStorageDriver, olderLayoutObjects, resolveLocalPath } from './local.storage-driver';
import { MinioStorageDriver } from './minio.storage-driver';
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

  it('round-trips bytes in <dataDir>/files/<prefix>/<shard>/<token>~<name>', async () => {
    const key = newObjectKey('uploads', 'photo.png');
    const token = key.split('/')[1];
    const body = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]);

    expect(await driver.exists(key)).toBe(false);
    await driver.put(key, body, 'image/png');
    expect(await driver.exists(key)).toBe(true);
    expect(await driver.get(key)).toEqual(body);
    expect(await fs.readFile(path.join(dataDir, 'files', 'uploads', token.slice(0, 2), `${token}~photo.png`))).toEqual(body);
    expect(await driver.findLocalFile(key)).toBe(driver.resolveLocalPath(key));

    const replacement = Buffer.from('second version');
    await driver.put(key, replacement, 'image/png');
    expect(await driver.get(key)).toEqual(replacement);

    await driver.remove(key);
    expect(await driver.exists(key)).toBe(false);
    await expect(driver.get(key)).rejects.toBeInstanceOf(StorageObjectNotFoundError);
    await expect(driver.remove(key)).resolves.toBeUndefined();
  });

  it("makes no directory per object: objects share their token's shard, which a remove keeps", async () => {
    const keys = Array.from({ length: 40 }, (_, i) => newObjectKey('results', `out-${i}.webp`));
    await Promise.all(keys.map((key) => driver.put(key, Buffer.from('x'), 'image/webp')));
    const results = path.join(dataDir, 'files', 'results');
    const shards = new Set(keys.map((key) => key.split('/')[1].slice(0, 2)));
    expect((await fs.readdir(results)).sort()).toEqual([...shards].sort());
    const files = (await Promise.all([...shards].map((shard) => fs.readdir(path.join(results, shard))))).flat();
    expect(files.sort()).toEqual(keys.map((key) => key.split('/').slice(1).join('~')).sort());

    const [first] = keys;
    const shard = path.join(results, first.split('/')[1].slice(0, 2));
    await driver.remove(first);
    expect(await driver.exists(first)).toBe(false);
    expect((await fs.stat(shard)).isDirectory()).toBe(true);
  });

  it('still reads, lists and removes objects of the directory-per-object layout, and writes a repeat put in the new one', async () => {
    const legacy = newObjectKey('results', 'old.png');
    const legacyFile = path.join(dataDir, 'files', legacy);
    await fs.mkdir(path.dirname(legacyFile), { recursive: true });
    await fs.writeFile(legacyFile, 'legacy bytes');
    const fresh = newObjectKey('results', 'new.png');
    await driver.put(fresh, Buffer.from('new bytes'), 'image/png');

    expect(await driver.exists(legacy)).toBe(true);
    expect((await driver.get(legacy)).toString()).toBe('legacy bytes');
    const chunks: Buffer[] = [];
    for await (const chunk of await driver.openRead(legacy)) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('legacy bytes');
    expect(await driver.findLocalFile(legacy)).toBe(legacyFile);
    const listed: string[] = [];
    for await (const { key } of driver.list('results')) listed.push(key);
    expect(listed.sort()).toEqual([fresh, legacy].sort());

    // The same key again (a retried task's result): written where puts go now, and read there first.
    await driver.put(legacy, Buffer.from('retried bytes'), 'image/png');
    expect((await driver.get(legacy)).toString()).toBe('retried bytes');
    expect(await driver.findLocalFile(legacy)).toBe(driver.resolveLocalPath(legacy));

    await driver.remove(legacy);
    expect(await driver.exists(legacy)).toBe(false);
    await expect(fs.stat(path.dirname(legacyFile))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await driver.findLocalFile(legacy)).toBeNull();
    expect((await driver.get(fresh)).toString()).toBe('new bytes');
  });

  it('counts the objects of the directory-per-object layout left, not the shards', async () => {
    expect(await olderLayoutObjects(driver)).toBe(0);
    await driver.put(newObjectKey('results', 'new.png'), Buffer.from('new bytes'), 'image/png');
    const legacy = [newObjectKey('results', 'old.png'), newObjectKey('uploads', 'old.png')];
    for (const key of legacy) {
      await fs.mkdir(path.dirname(path.join(dataDir, 'files', key)), { recursive: true });
      await fs.writeFile(path.join(dataDir, 'files', key), 'legacy bytes');
    }
    expect(await olderLayoutObjects(driver)).toBe(2);
    await driver.remove(legacy[0]);
    expect(await driver.olderLayoutObjects()).toBe(1);
    expect(
      await olderLayoutObjects(
        new MinioStorageDriver({
          endPoint: '127.0.0.1',
          port: 1,
          useSSL: false,
          accessKey: 'a',
          secretKey: 's',
          bucket: 'b',
          publicUrl: 'http://127.0.0.1:1/b',
        }),
      ),
    ).toBe(0);
  });

  it('lists no temp file and no stray name as an object', async () => {
    const key = newObjectKey('previews', 'preview.webp');
    await driver.put(key, Buffer.from('x'), 'image/webp');
    const shard = path.dirname(driver.resolveLocalPath(key)!);
    const token = key.split('/')[1];
    await fs.writeFile(path.join(shard, `.${token}~preview.webp.abc123.tmp`), 'half');
    // A name in a shard its token does not belong to, and one with a character keys never have.
    await fs.writeFile(path.join(shard, `zz${token.slice(2)}~preview.webp`), 'x');
    await fs.writeFile(path.join(shard, `${token}~a~b.webp`), 'x');
    const listed: string[] = [];
    for await (const object of driver.list('previews')) listed.push(object.key);
    expect(listed).toEqual([key]);
  });

  it('handles concurrent puts of the same key without mixing bodies', async () => {
    const key = newObjectKey('uploads', 'same.bin');
    const bodies = Array.from({ length: 20 }, (_, i) => Buffer.alloc(64 * 1024, i));
    await Promise.all(bodies.map((body) => driver.put(key, body, 'application/octet-stream')));
    const stored = await driver.get(key);
    expect(bodies.some((body) => body.equals(stored))).toBe(true);
    expect(await fs.readdir(path.dirname(driver.resolveLocalPath(key)!))).toEqual([key.split('/').slice(1).join('~')]);
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

  it('resolves valid keys to absolute paths under <dataDir>/files', async () => {
    const key = 'uploads/0123/a.png';
    const expected = path.join(dataDir, 'files', 'uploads', '01', '0123~a.png');
    expect(driver.resolveLocalPath(key)).toBe(expected);
    expect(resolveLocalPath(dataDir, key)).toBe(expected);
    expect(resolveLocalPath(dataDir, 'uploads/a.png')).toBe(path.join(dataDir, 'files', 'uploads', 'a.png'));
    expect(await driver.findLocalFile(key)).toBeNull();
    expect(await driver.findLocalFile('../escape')).toBeNull();
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
