import { promises as fs } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { resolveLocalPath, StorageDriver } from '@app/storage';
import { UPLOAD_LIMITS, UploadsService } from '@app/uploads';
import { buildConfig, KILN_CONFIG } from '@app/config';
import { bootTestApp, TestAccount, TestApp } from '@app/testing';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { paddedTo, pngClaiming, sampleImage } from './fixtures/images';

const UPLOADS_DIR = () => path.join(process.env.DATA_DIR as string, 'files', 'uploads');
const MB10 = 10 * 1024 * 1024;

interface FilePart {
  name: string;
  body: Buffer;
}

describe('POST /v1/uploads and GET /files (docs/api.md#uploads)', () => {
  let t: TestApp;
  let a: TestAccount;
  let server: http.Server;
  let sharedDataDir: string | undefined;

  beforeAll(async () => {
    // A data directory of this file's own, so its temp-file checks see no other file's uploads.
    sharedDataDir = process.env.DATA_DIR;
    process.env.DATA_DIR = await fs.mkdtemp(path.join(sharedDataDir ?? '/tmp', 'uploads-'));
    t = await bootTestApp(ApiModule, configureApp, [[KILN_CONFIG, buildConfig(process.env)]]);
    server = t.app.getHttpServer();
    // Listening ourselves lets rawGet send paths no URL parser has normalised.
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    a = await t.account();
  });
  afterAll(async () => {
    await t.close();
    process.env.DATA_DIR = sharedDataDir;
  });

  /** Temp files of multipart requests still on disk (none once every response is over). */
  const leftovers = async () => (await fs.readdir(path.join(process.env.DATA_DIR as string, 'incoming')).catch(() => [])).length;

  const upload = (key: string, files: FilePart[], field = 'file') => {
    const req = t.http.post('/v1/uploads').set('Authorization', `Bearer ${key}`);
    for (const f of files) req.attach(field, f.body, f.name);
    return req;
  };

  /** GET a public URL of ours, without auth, keeping the body as bytes. */
  const download = (url: string) =>
    t.http
      .get(new URL(url).pathname)
      .buffer(true)
      .parse((res, cb) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => cb(null, Buffer.concat(chunks)));
      });

  const rawGet = (rawPath: string) =>
    new Promise<{ status: number; body: any }>((resolve, reject) => {
      const { port } = server.address() as AddressInfo;
      http
        .get({ host: '127.0.0.1', port, path: rawPath }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString();
            let body: any = text;
            try {
              body = JSON.parse(text);
            } catch {
              /* not JSON */
            }
            resolve({ status: res.statusCode ?? 0, body });
          });
        })
        .on('error', reject);
    });

  const expectRefusal = (res: Response, details: Record<string, unknown>) => {
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    expect(typeof res.body.error.message).toBe('string');
    expect(res.body.error.details).toMatchObject(details);
  };

  const uploadRows = async (accountId: string): Promise<any[]> =>
    t.db.query(`SELECT * FROM uploads WHERE account_id = $1 ORDER BY created_at`, [accountId]);

  /** Names of every stored upload object (and any leftover temp file) on disk. */
  const storedNames = async (): Promise<string[]> => {
    const names: string[] = [];
    const dirs = await fs.readdir(UPLOADS_DIR()).catch(() => [] as string[]);
    for (const dir of dirs) {
      names.push(...(await fs.readdir(path.join(UPLOADS_DIR(), dir)).catch(() => [] as string[])));
    }
    return names;
  };

  /**
   * Refusal tests run against a fresh account and unique file names, so "stored nothing" is
   * checked on this account's rows and on disk without depending on other test files.
   */
  const expectNothingStored = async (accountId: string, marker: string) => {
    expect(await uploadRows(accountId)).toHaveLength(0);
    expect((await storedNames()).filter((n) => n.includes(marker))).toEqual([]);
    await expectNoTempFiles();
  };

  /** A refused or accepted request leaves none of its temp files (removed as its response ends). */
  const expectNoTempFiles = async () => {
    for (let i = 0; i < 50 && (await leftovers()) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await leftovers()).toBe(0);
  };

  describe('accepted uploads', () => {
    it.each([
      ['png', 'image/png', 'png'],
      ['jpeg', 'image/jpeg', 'jpg'],
      ['webp', 'image/webp', 'webp'],
      ['gif', 'image/gif', 'gif'],
    ] as const)('a %s is stored and downloadable without auth, byte for byte', async (format, contentType, ext) => {
      const body = await sampleImage(format, 12, 7);
      const name = `ref-${format}.${ext}`;
      const res = await upload(a.key, [{ name, body }]).expect(200);

      expect(res.body).toEqual({ files: [{ url: expect.any(String), name }] });
      const { url } = res.body.files[0];
      // Unguessable: 128 random bits (32 hex) in the path, under PUBLIC_BASE_URL/files.
      expect(url).toMatch(new RegExp(`^http://kiln\\.test/files/uploads/[0-9a-f]{32}/ref-${format}\\.${ext}$`));

      const file = await download(url).expect(200);
      expect(file.headers['content-type']).toBe(contentType);
      expect(file.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(file.headers['x-content-type-options']).toBe('nosniff');
      expect(Buffer.compare(file.body as Buffer, body)).toBe(0);

      const [row] = await t.db.query(`SELECT * FROM uploads WHERE url = $1`, [url]);
      expect(row).toMatchObject({
        account_id: a.id,
        name,
        content_type: contentType,
        bytes: body.length,
        width: 12,
        height: 7,
      });
      expect(url.endsWith(row.storage_key)).toBe(true);
    });

    it('stores several files in one request, in order, each with its own URL', async () => {
      const files = await Promise.all(
        (['png', 'jpeg', 'webp'] as const).map(async (f, i) => ({ name: `multi-${i}.img`, body: await sampleImage(f) })),
      );
      const res = await upload(a.key, files).expect(200);
      expect(res.body.files.map((f: { name: string }) => f.name)).toEqual(['multi-0.img', 'multi-1.img', 'multi-2.img']);
      expect(res.body.files.map((f: { url: string }) => path.extname(f.url))).toEqual(['.png', '.jpg', '.webp']);
      expect(new Set(res.body.files.map((f: { url: string }) => f.url)).size).toBe(3);
      // The files went through temp files on disk (the directory exists), which are gone now.
      expect((await fs.stat(path.join(process.env.DATA_DIR as string, 'incoming'))).isDirectory()).toBe(true);
      await expectNoTempFiles();
    });

    it('decides the type by magic bytes: JPEG bytes named .png are stored and served as JPEG', async () => {
      const body = await sampleImage('jpeg');
      const res = await upload(a.key, [{ name: 'photo.png', body }]).expect(200);
      const [{ url, name }] = res.body.files;
      expect(name).toBe('photo.png');
      expect(url).toMatch(/\/photo\.jpg$/);
      const [row] = await t.db.query(`SELECT content_type FROM uploads WHERE url = $1`, [url]);
      expect(row.content_type).toBe('image/jpeg');
      const file = await download(url).expect(200);
      expect(file.headers['content-type']).toBe('image/jpeg');
      expect(Buffer.compare(file.body as Buffer, body)).toBe(0);
    });

    it('returns the original name but stores a sanitised one', async () => {
      const name = 'Été  (copy) 日本.png';
      const res = await upload(a.key, [{ name, body: await sampleImage('png') }]).expect(200);
      expect(res.body.files[0].name).toBe(name);
      expect(res.body.files[0].url).toMatch(/\/files\/uploads\/[0-9a-f]{32}\/Ete-copy-\.png$/);
    });

    it('accepts a file of exactly 10 MB', async () => {
      const body = paddedTo(await sampleImage('png'), MB10);
      expect(body.length).toBe(UPLOAD_LIMITS.maxBytes);
      const res = await upload(a.key, [{ name: 'exactly-10mb.png', body }]).expect(200);
      const [row] = await t.db.query(`SELECT bytes FROM uploads WHERE url = $1`, [res.body.files[0].url]);
      expect(row.bytes).toBe(MB10);
    });

    it('accepts exactly 20 files', async () => {
      const body = await sampleImage('gif');
      const files = Array.from({ length: 20 }, (_, i) => ({ name: `twenty-${i}.gif`, body }));
      const res = await upload(a.key, files).expect(200);
      expect(res.body.files).toHaveLength(20);
    });
  });

  describe('refusals store nothing', () => {
    let fresh: TestAccount;
    let marker: string;
    beforeEach(async () => {
      fresh = await t.account();
      marker = `m${randomUUID().slice(0, 8)}`;
    });

    it('wrong magic bytes (a text file named .png) -> unsupported_type', async () => {
      const res = await upload(fresh.key, [{ name: `${marker}.png`, body: Buffer.from('definitely not an image\n') }]);
      expectRefusal(res, { file: `${marker}.png`, reason: 'unsupported_type' });
      await expectNothingStored(fresh.id, marker);
    });

    it('a corrupt image with a valid signature -> unsupported_type', async () => {
      const png = await sampleImage('png');
      const corrupt = Buffer.concat([png.subarray(0, 12), Buffer.alloc(64, 0x41)]);
      const res = await upload(fresh.key, [{ name: `${marker}.png`, body: corrupt }]);
      expectRefusal(res, { file: `${marker}.png`, reason: 'unsupported_type' });
      await expectNothingStored(fresh.id, marker);
    });

    it('an image type outside PNG/JPEG/WebP/GIF (TIFF) -> unsupported_type', async () => {
      const { default: sharp } = await import('sharp');
      const tiff = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#000' } })
        .tiff()
        .toBuffer();
      expectRefusal(await upload(fresh.key, [{ name: `${marker}.png`, body: tiff }]), {
        file: `${marker}.png`,
        reason: 'unsupported_type',
      });
      await expectNothingStored(fresh.id, marker);
    });

    it('10 MB + 1 byte -> too_large', async () => {
      const body = paddedTo(await sampleImage('png'), MB10 + 1);
      const res = await upload(fresh.key, [{ name: `${marker}.png`, body }]);
      expectRefusal(res, { file: `${marker}.png`, reason: 'too_large', maxBytes: MB10 });
      await expectNothingStored(fresh.id, marker);
    });

    it('21 files -> too_many_files, naming the 21st', async () => {
      const body = await sampleImage('png');
      const files = Array.from({ length: 21 }, (_, i) => ({ name: `${marker}-${i}.png`, body }));
      const res = await upload(fresh.key, files);
      expectRefusal(res, { reason: 'too_many_files', file: `${marker}-20.png`, max: 20 });
      await expectNothingStored(fresh.id, marker);
    });

    it('a multipart body without any file -> no_files', async () => {
      const boundary = 'kilnboundary';
      const emptyFileInput =
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename=""\r\n` +
        `Content-Type: application/octet-stream\r\n\r\n\r\n--${boundary}--\r\n`;
      const res = await t.http
        .post('/v1/uploads')
        .set('Authorization', `Bearer ${fresh.key}`)
        .set('Content-Type', `multipart/form-data; boundary=${boundary}`)
        .send(emptyFileInput);
      expectRefusal(res, { field: 'file', reason: 'no_files' });
      await expectNothingStored(fresh.id, marker);
    });

    it.each([
      ['a 60000x60000 header', 60_000, 60_000],
      ['a 20000-pixel-wide strip', 20_000, 10],
    ])('a pixel bomb (%s) -> too_many_pixels, without decoding it', async (_label, width, height) => {
      const bomb = pngClaiming(width, height);
      expect(bomb.length).toBeLessThan(100);
      const res = await upload(fresh.key, [{ name: `${marker}.png`, body: bomb }]);
      expectRefusal(res, {
        file: `${marker}.png`,
        reason: 'too_many_pixels',
        width,
        height,
        maxPixels: UPLOAD_LIMITS.maxPixels,
        maxDimension: UPLOAD_LIMITS.maxDimension,
      });
      await expectNothingStored(fresh.id, marker);
    });

    it('a real, highly compressible 7100x7100 PNG (50.4 MP) -> too_many_pixels', async () => {
      const body = await sampleImage('png', 7100, 7100);
      expect(body.length).toBeLessThan(MB10);
      expectRefusal(await upload(fresh.key, [{ name: `${marker}.png`, body }]), {
        file: `${marker}.png`,
        reason: 'too_many_pixels',
      });
      await expectNothingStored(fresh.id, marker);
    });

    it('one bad file among good ones refuses the whole request; the good ones are not written', async () => {
      const good = await sampleImage('png');
      const res = await upload(fresh.key, [
        { name: `${marker}-good-1.png`, body: good },
        { name: `${marker}-good-2.png`, body: good },
        { name: `${marker}-bad.png`, body: Buffer.from('nope') },
        { name: `${marker}-good-3.png`, body: good },
      ]);
      expectRefusal(res, { file: `${marker}-bad.png`, reason: 'unsupported_type' });
      await expectNothingStored(fresh.id, marker);
    });

    it('a storage failure midway removes what was already written and stores no row', async () => {
      const storage = t.app.get(StorageDriver);
      const realPut = storage.put.bind(storage);
      let calls = 0;
      const spy = jest.spyOn(storage, 'put').mockImplementation(async (key, body, type) => {
        calls += 1;
        // Files are stored one by one: the first lands, so there is something to clean up.
        if (calls === 2) throw new Error('disk full');
        return realPut(key, body, type);
      });
      try {
        const good = await sampleImage('png');
        const res = await upload(
          fresh.key,
          [1, 2, 3].map((i) => ({ name: `${marker}-${i}.png`, body: good })),
        );
        expect(res.status).toBe(500);
        expect(res.body.error.code).toBe('internal_error');
        // The third is never tried once the second has failed.
        expect(spy).toHaveBeenCalledTimes(2);
      } finally {
        spy.mockRestore();
      }
      await expectNothingStored(fresh.id, marker);
    });
  });

  describe('malformed requests get the error object, never a 500 or a framework body', () => {
    it.each([
      ['a JSON body', (r: any) => r.send({ file: 'x' }), { field: 'body', reason: 'not_multipart' }],
      ['no body at all', (r: any) => r, { field: 'body', reason: 'not_multipart' }],
      [
        'multipart without a boundary',
        (r: any) => r.set('Content-Type', 'multipart/form-data').send('garbage'),
        { field: 'body', reason: 'malformed_multipart' },
      ],
      [
        'a truncated multipart body',
        (r: any) =>
          r
            .set('Content-Type', 'multipart/form-data; boundary=xyz')
            .send('--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\n\x89PNG'),
        { field: 'body', reason: 'malformed_multipart' },
      ],
      ['a text field', (r: any) => r.field('note', 'hello'), { reason: 'unknown_field' }],
    ])('%s -> invalid_request', async (_label, build, details) => {
      const res = await build(t.http.post('/v1/uploads').set('Authorization', `Bearer ${a.key}`));
      expectRefusal(res, details);
    });

    it('a file under another field name -> invalid_request unexpected_field', async () => {
      const res = await upload(a.key, [{ name: 'x.png', body: await sampleImage('png') }], 'image');
      expectRefusal(res, { field: 'image', file: 'x.png', reason: 'unexpected_field' });
    });
  });

  describe('auth', () => {
    it('no key -> 401 unauthorized', async () => {
      const res = await t.http.post('/v1/uploads').attach('file', await sampleImage('png'), 'a.png');
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    });

    it('a key without uploads:write -> 403 insufficient_scope', async () => {
      const limited = await t.account({ scopes: ['models:read', 'batches:write'] });
      const res = await upload(limited.key, [{ name: 'a.png', body: await sampleImage('png') }]);
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'insufficient_scope', details: { required: 'uploads:write' } });
      expect(await uploadRows(limited.id)).toHaveLength(0);
    });
  });

  describe('ownership', () => {
    it("findOwnedByUrls returns the caller's uploads only", async () => {
      const other = await t.account();
      const res = await upload(a.key, [{ name: 'mine.png', body: await sampleImage('png') }]).expect(200);
      const url: string = res.body.files[0].url;
      const service = t.app.get(UploadsService);
      expect((await service.findOwnedByUrls(other.id, [url])).size).toBe(0);
      const own = await service.findOwnedByUrls(a.id, [url, url, 'http://kiln.test/files/uploads/x/y.png']);
      expect([...own.keys()]).toEqual([url]);
      expect(own.get(url)).toMatchObject({ accountId: a.id, name: 'mine.png', contentType: 'image/png' });
    });
  });

  describe('GET /files', () => {
    it.each([
      '/files/../../etc/passwd',
      '/files/uploads/../../../etc/passwd',
      '/files/uploads/%2e%2e/%2e%2e/%2e%2e/etc/passwd',
      '/files/uploads%2f..%2f..%2fpackage.json',
      '/files/..%5c..%5cpackage.json',
      '/files/%2fetc%2fpasswd',
      '/files/uploads/.hidden',
      '/files/uploads/0123456789abcdef0123456789abcdef/missing.png',
      '/files/uploads',
      '/files/',
      '/v1/files/uploads/x.png',
    ])('%s -> 404 not_found', async (rawPath) => {
      const res = await rawGet(rawPath);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    });

    it('needs no auth and ignores a bad one', async () => {
      const body = await sampleImage('webp');
      const res = await upload(a.key, [{ name: 'pub.webp', body }]).expect(200);
      const pathname = new URL(res.body.files[0].url).pathname;
      await t.http.get(pathname).set('Authorization', 'Bearer nonsense').expect(200);
      const head = await t.http.head(pathname).expect(200);
      expect(head.headers['content-length']).toBe(String(body.length));
    });

    it('serves an object stored in the directory-per-object layout (before the sharded one) at the same URL', async () => {
      const body = await sampleImage('png');
      const key = `results/${randomUUID().replace(/-/g, '')}/kiln-0a1b2c3d-0001.png`;
      const legacyFile = path.join(process.env.DATA_DIR as string, 'files', key);
      await fs.mkdir(path.dirname(legacyFile), { recursive: true });
      await fs.writeFile(legacyFile, body);
      const res = await download(`http://kiln.test/files/${key}`).expect(200);
      expect(res.headers['content-type']).toBe('image/png');
      expect(Buffer.compare(res.body as Buffer, body)).toBe(0);
      // Written again through the driver (a retried task), the new layout's copy is the one served.
      const again = await sampleImage('png', 3, 3);
      await t.app.get(StorageDriver).put(key, again, 'image/png');
      expect(Buffer.compare((await download(`http://kiln.test/files/${key}`).expect(200)).body as Buffer, again)).toBe(0);
    });
  });

  describe('retention (docs/api.md#result-urls-and-retention)', () => {
    it('purgeExpired removes rows and objects older than RETENTION_DAYS, and nothing newer', async () => {
      const owner = await t.account();
      const png = await sampleImage('png');
      const res = await upload(owner.key, [
        { name: 'old.png', body: png },
        { name: 'recent.png', body: png },
      ]).expect(200);
      const [oldUrl, recentUrl] = res.body.files.map((f: { url: string }) => f.url);
      await t.db.query(`UPDATE uploads SET created_at = now() - interval '31 days' WHERE url = $1`, [oldUrl]);
      await t.db.query(`UPDATE uploads SET created_at = now() - interval '29 days' WHERE url = $1`, [recentUrl]);

      const purged = await t.app.get(UploadsService).purgeExpired(new Date());
      expect(purged).toBeGreaterThanOrEqual(1);

      const rows = await uploadRows(owner.id);
      expect(rows.map((r) => r.url)).toEqual([recentUrl]);
      await download(oldUrl).expect(404);
      await download(recentUrl).expect(200);
      const oldKey = new URL(oldUrl).pathname.replace(/^\/files\//, '');
      await expect(fs.stat(resolveLocalPath(process.env.DATA_DIR as string, oldKey)!)).rejects.toMatchObject({
        code: 'ENOENT',
      });
    });
  });

  it('documents the upload endpoint as multipart with a binary array "file"', async () => {
    const doc = (await t.http.get('/v1/openapi.json').expect(200)).body;
    const op = doc.paths['/v1/uploads'].post;
    const schema = op.requestBody.content['multipart/form-data'].schema;
    expect(schema.properties.file).toMatchObject({ type: 'array', items: { type: 'string', format: 'binary' } });
    expect(op.responses['200']).toBeDefined();
    expect(Object.keys(doc.paths).filter((p) => p.includes('/files'))).toEqual([]);
  });
});
