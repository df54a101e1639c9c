import { TestingModule } from '@nestjs/testing';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import S3rver from 's3rver';
import { buildConfig, KilnConfig } from '@app/config';
import { pixelSize } from '@app/providers';
import { StorageDriver } from '@app/storage';
import {
  bearer,
  createBatch,
  createBatchVia,
  download,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  routeModel,
  solidPng,
  TestAccount,
  TestApp,
  upload,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

jest.setTimeout(90_000);

/**
 * The entries of a zip as written by the archive (stored, not deflated), read from its
 * central directory: names and bytes.
 */
function unzip(zip: Buffer): Map<string, Buffer> {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (eocd < 0) throw new Error('not a zip: no end of central directory');
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  const entries = new Map<string, Buffer>();
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error('bad central directory entry');
    const method = zip.readUInt16LE(at + 10);
    const size = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.toString('utf8', at + 46, at + 46 + nameLength);
    if (method !== 0) throw new Error(`${name} is compressed (method ${method}); the archive stores entries`);
    const dataAt = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    entries.set(name, zip.subarray(dataAt, dataAt + size));
    at += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

function getArchive(t: TestApp, a: TestAccount, id: string) {
  return t.http
    .get(`/v1/batches/${id}/archive`)
    .set('Authorization', bearer(a))
    .buffer(true)
    .parse((r, cb) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => cb(null, Buffer.concat(chunks)));
    });
}

describe('Task details and archives (local storage, the real generator)', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;

  beforeAll(async () => {
    env = await fileEnvironment('task_details', {
      generator: { ...buildConfig(process.env).generator, concurrency: 8, maxAttempts: 2, backoffMs: 20, reconcileIntervalMs: 600_000 },
    });
    config = env.config;
    api = await bootApi(config);
    gen = await bootGenerator(config);
    a = await api.account({ plan: 'scale', credits: 5000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await env?.teardown();
  });

  it('tasks say their index, prompt, reference and copy under each, combined and none', async () => {
    const refs = [
      await upload(api, a, await solidPng(16, 16, { r: 255, g: 0, b: 0 }), 'red.png'),
      await upload(api, a, await solidPng(16, 16, { r: 0, g: 0, b: 255 }), 'blue.png'),
    ];
    const each = await createBatch(api, a, { model: 'eta-image', prompts: ['A', 'B'], refMode: 'each', refImages: refs, countPerCombo: 2 });
    const combined = await createBatch(api, a, {
      model: 'eta-image',
      prompts: ['A', 'B'],
      refMode: 'combined',
      refImages: refs,
      countPerCombo: 2,
    });
    const none = await createBatch(api, a, { model: 'eta-image', prompts: ['A', 'B', 'C'] });

    const position = (t: any) => [t.index, t.prompt, t.promptIndex, t.refImage, t.copy];
    expect((await getBatch(api, a, each)).tasks.map(position)).toEqual([
      [1, 'A', 0, refs[0], 1],
      [2, 'A', 0, refs[0], 2],
      [3, 'A', 0, refs[1], 1],
      [4, 'A', 0, refs[1], 2],
      [5, 'B', 1, refs[0], 1],
      [6, 'B', 1, refs[0], 2],
      [7, 'B', 1, refs[1], 1],
      [8, 'B', 1, refs[1], 2],
    ]);
    expect((await getBatch(api, a, combined)).tasks.map(position)).toEqual([
      [1, 'A', 0, null, 1],
      [2, 'A', 0, null, 2],
      [3, 'B', 1, null, 1],
      [4, 'B', 1, null, 2],
    ]);
    expect((await getBatch(api, a, none)).tasks.map(position)).toEqual([
      [1, 'A', 0, null, 1],
      [2, 'B', 1, null, 1],
      [3, 'C', 2, null, 1],
    ]);
    await Promise.all([each, combined, none].map((id) => waitForBatchDone(api, id, 60_000)));
  });

  it("width and height are the stored image's, once succeeded; result names are unique across batches", async () => {
    const builtin = await createBatch(api, a, { model: 'eta-image', prompts: ['wide', 'also wide'], aspectRatio: '16:9' });
    const restore = await routeModel(api, 'beta-2', { type: 'simulated' });
    let simulated: string;
    try {
      simulated = await createBatch(api, a, { model: 'beta-2', prompts: ['small'], aspectRatio: '16:9' });
    } finally {
      await restore();
    }
    await Promise.all([waitForBatchDone(api, builtin), waitForBatchDone(api, simulated)]);

    const b = await getBatch(api, a, builtin);
    for (const t of b.tasks) expect(t).toMatchObject({ status: 'succeeded', ...pixelSize('16:9', '1K'), errorCode: null });
    // When a worker took it and when it ended: the time it took (the web app's "Time taken").
    for (const t of b.tasks) {
      expect(t.startedAt).toEqual(expect.any(Number));
      expect(t.finishedAt).toBeGreaterThanOrEqual(t.startedAt);
      expect(t.startedAt).toBeGreaterThanOrEqual(b.batch.createdAt);
    }
    // Read as Unix ms in SQL (not parsed as dates): the same instants, truncated to the ms.
    const stored: { id: string; started_at: Date; finished_at: Date }[] = await api.db.query(
      `SELECT id, started_at, finished_at FROM tasks WHERE batch_id = $1`,
      [builtin],
    );
    for (const row of stored) {
      expect(b.tasks.find((t) => t.id === row.id)).toMatchObject({
        startedAt: row.started_at.getTime(),
        finishedAt: row.finished_at.getTime(),
      });
    }
    // The simulated provider draws a 64 px thumbnail whatever is asked: the task says so.
    const s = await getBatch(api, a, simulated);
    expect(s.tasks[0]).toMatchObject({ status: 'succeeded', width: 64, height: 36 });

    const names = [...b.tasks, ...s.tasks].map((t: any) => new URL(t.resultUrls[0]).pathname.split('/').pop());
    expect(names).toEqual([
      `kiln-${builtin.slice(0, 8)}-0001.png`,
      `kiln-${builtin.slice(0, 8)}-0002.png`,
      `kiln-${simulated.slice(0, 8)}-0001.png`,
    ]);
  });

  it('errorCode says why a task failed: an upstream failure that persists is upstream_unavailable', async () => {
    const restore = await routeModel(api, 'beta-2', { type: 'simulated', failureRate: 1 });
    const restoreBusy = await routeModel(api, 'beta-2-1', { type: 'simulated', rateLimitRate: 1 });
    let failing: string;
    let busy: string;
    try {
      failing = await createBatch(api, a, { model: 'beta-2', prompts: ['doomed'] });
      busy = await createBatch(api, a, { model: 'beta-2-1', prompts: ['always 429'] });
    } finally {
      await restore();
      await restoreBusy();
    }
    await Promise.all([waitForBatchDone(api, failing), waitForBatchDone(api, busy)]);
    expect((await getBatch(api, a, failing)).tasks[0]).toMatchObject({
      status: 'failed',
      error: 'Simulated upstream failure',
      errorCode: 'upstream_unavailable',
      width: null,
      height: null,
      startedAt: expect.any(Number),
      finishedAt: expect.any(Number),
    });
    expect((await getBatch(api, a, busy)).tasks[0]).toMatchObject({ status: 'failed', errorCode: 'upstream_unavailable' });
  });

  it('the archive holds each image byte for byte under images/<index>-<slug>.png, and a manifest', async () => {
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['A Red Fox!', 'a red fox', '日本の桜'], note: 'zip me' });
    await waitForBatchDone(api, id);
    const { batch, tasks } = await getBatch(api, a, id);

    const res = await getArchive(api, a, id);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/zip');
    expect(res.headers['content-disposition']).toBe(`attachment; filename="kiln-${id}.zip"`);
    const entries = unzip(res.body as Buffer);
    expect([...entries.keys()].sort()).toEqual([
      'images/0001-a-red-fox.png',
      'images/0002-a-red-fox.png',
      'images/0003-image.png',
      'manifest.json',
    ]);
    for (const [i, name] of ['images/0001-a-red-fox.png', 'images/0002-a-red-fox.png', 'images/0003-image.png'].entries()) {
      const file = await download(api, tasks[i].resultUrls[0]);
      expect(entries.get(name)!.equals(file.body)).toBe(true);
    }
    const manifest = JSON.parse(entries.get('manifest.json')!.toString('utf8'));
    expect(manifest.batch).toEqual(batch);
    expect(manifest.tasks).toHaveLength(3);
    expect(manifest.tasks[0]).toMatchObject({
      id: tasks[0].id,
      index: 1,
      prompt: 'A Red Fox!',
      status: 'succeeded',
      error: null,
      url: tasks[0].resultUrls[0],
      file: 'images/0001-a-red-fox.png',
    });
  });

  it('images past retention are left out with file: null', async () => {
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['kept', 'expired', 'lost'] });
    await waitForBatchDone(api, id);
    const rows = await api.db.query(`SELECT id, result_key FROM tasks WHERE batch_id = $1 ORDER BY seq`, [id]);
    // As the retention sweep leaves a task: object removed, key forgotten, URL kept.
    const storage = api.app.get(StorageDriver);
    await storage.remove(rows[1].result_key);
    await api.db.query(`UPDATE tasks SET result_key = NULL WHERE id = $1`, [rows[1].id]);
    // And an object gone while its row still names it.
    await storage.remove(rows[2].result_key);

    const res = await getArchive(api, a, id);
    expect(res.status).toBe(200);
    const entries = unzip(res.body as Buffer);
    expect([...entries.keys()].sort()).toEqual(['images/0001-kept.png', 'manifest.json']);
    const manifest = JSON.parse(entries.get('manifest.json')!.toString('utf8'));
    expect(manifest.tasks.map((t: any) => t.file)).toEqual(['images/0001-kept.png', null, null]);
    expect(manifest.tasks[1].url).toMatch(/kiln-.{8}-0002\.png$/);
  });

  it('may be fetched while the batch runs: what has succeeded so far', async () => {
    const id = await createBatchVia(api, a, 'beta-2', { type: 'simulated', latencyMs: 1500 }, { prompts: ['slow one', 'slow two'] });
    const res = await getArchive(api, a, id);
    expect(res.status).toBe(200);
    const entries = unzip(res.body as Buffer);
    const manifest = JSON.parse(entries.get('manifest.json')!.toString('utf8'));
    expect(manifest.batch.done).toBe(false);
    const succeeded = manifest.tasks.filter((t: any) => t.status === 'succeeded').length;
    expect(entries.size).toBe(1 + succeeded);
    await waitForBatchDone(api, id);
  });

  it("another account's batch, or no batch, is 404 not_found as JSON", async () => {
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['mine'] });
    const other = await api.account({ credits: 10 });
    for (const [who, path] of [
      [other, `/v1/batches/${id}/archive`],
      [a, '/v1/batches/00000000-0000-4000-8000-000000000000/archive'],
      [a, '/v1/batches/not-a-uuid/archive'],
    ] as const) {
      const res = await api.http.get(path).set('Authorization', bearer(who));
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    const readOnlyless = await api.account({ credits: 10, scopes: ['batches:write'] });
    expect((await api.http.get(`/v1/batches/${id}/archive`).set('Authorization', bearer(readOnlyless))).status).toBe(403);
    await waitForBatchDone(api, id);
  });
});

describe('Archives with the MinIO driver (s3rver)', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let server: S3rver;
  let directory: string;

  beforeAll(async () => {
    directory = await fs.mkdtemp(path.join(os.tmpdir(), 'kiln-archive-s3rver-'));
    server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: [] });
    const { port } = await server.run();
    const base = buildConfig(process.env);
    env = await fileEnvironment('archive_minio', {
      storage: {
        ...base.storage,
        driver: 'minio',
        minio: {
          ...base.storage.minio,
          endPoint: '127.0.0.1',
          port,
          useSSL: false,
          accessKey: 'S3RVER',
          secretKey: 'S3RVER',
          bucket: 'kiln-archive',
          publicUrl: `http://127.0.0.1:${port}/kiln-archive`,
        },
      },
      generator: { ...base.generator, concurrency: 4, reconcileIntervalMs: 600_000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await env?.teardown();
    await server?.close();
    await fs.rm(directory, { recursive: true, force: true });
  });

  it('entries are byte-identical to the result URLs', async () => {
    const a = await api.account({ credits: 100 });
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['A Red Fox!', 'second'], aspectRatio: '4:3' });
    await waitForBatchDone(api, id);
    const { tasks } = await getBatch(api, a, id);
    const entries = unzip((await getArchive(api, a, id)).body as Buffer);
    expect([...entries.keys()].sort()).toEqual(['images/0001-a-red-fox.png', 'images/0002-second.png', 'manifest.json']);
    for (const [i, name] of ['images/0001-a-red-fox.png', 'images/0002-second.png'].entries()) {
      expect(tasks[i].resultUrls[0]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/kiln-archive\/results\//);
      const served = Buffer.from(await (await fetch(tasks[i].resultUrls[0], { signal: AbortSignal.timeout(10_000) })).arrayBuffer());
      expect(entries.get(name)!.equals(served)).toBe(true);
      expect(tasks[i]).toMatchObject(pixelSize('4:3', '1K'));
    }
  });
});
