import { TestingModule } from '@nestjs/testing';
import sharp from 'sharp';
import { buildConfig } from '@app/config';
import {
  batchCount,
  bearer,
  createBatch,
  createBatchVia,
  download,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  postBatch,
  taskRows,
  TestAccount,
  TestApp,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

jest.setTimeout(120_000);

/** seed and outputFormat on create and estimate, through the real generator (docs/api.md). */
describe('A batch seed and output format', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;

  beforeAll(async () => {
    env = await fileEnvironment('seed_format', {
      generator: { ...buildConfig(process.env).generator, concurrency: 4, reconcileIntervalMs: 600_000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    a = await api.account({ plan: 'scale', credits: 5000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await env?.teardown();
  });

  const images = async (id: string) => {
    await waitForBatchDone(api, id, 60_000);
    const { batch, tasks } = await getBatch(api, a, id);
    const files = await Promise.all(tasks.map((t: any) => download(api, t.resultUrls[0])));
    return { batch, tasks, files };
  };

  it('task n renders with seed + n - 1; the same seed makes the same images, and the batch echoes it', async () => {
    const body = { model: 'eta-image', prompts: ['a fox', 'a hare'], countPerCombo: 2, seed: 2 ** 31 - 2 };
    const first = await createBatch(api, a, body);
    const again = await createBatch(api, a, body);
    const seeds = (await taskRows(api, first)).sort((x, y) => x.seq - y.seq).map((t) => t.seed);
    // Past 2^31 - 1 the seed wraps to 0.
    expect(seeds).toEqual([2 ** 31 - 2, 2 ** 31 - 1, 0, 1]);
    const one = await images(first);
    const two = await images(again);
    expect(one.batch).toMatchObject({ seed: 2 ** 31 - 2, outputFormat: 'png' });
    expect(one.files.map((f) => f.body.equals(two.files[one.files.indexOf(f)].body))).toEqual([true, true, true, true]);
    // Copies of one prompt differ by their seed.
    expect(one.files[0].body.equals(one.files[1].body)).toBe(false);

    const unseeded = await createBatch(api, a, { model: 'eta-image', prompts: ['a fox'] });
    expect((await getBatch(api, a, unseeded)).batch).toMatchObject({ seed: null, outputFormat: 'png' });
    await waitForBatchDone(api, unseeded, 60_000);
  });

  it('outputFormat jpeg and webp: stored, served and named in that format, from the builtin and a converted upstream', async () => {
    const jpeg = await images(await createBatch(api, a, { model: 'eta-image', prompts: ['a fox'], outputFormat: 'jpeg' }));
    expect(jpeg.batch.outputFormat).toBe('jpeg');
    expect(jpeg.tasks[0].resultUrls[0]).toMatch(/\.jpg$/);
    expect(jpeg.files[0].type).toContain('image/jpeg');
    expect((await sharp(jpeg.files[0].body).metadata()).format).toBe('jpeg');

    // The simulated route answers PNG: the generator converts it.
    const id = await createBatchVia(api, a, 'beta-2', { type: 'simulated' }, { prompts: ['a hare', 'a lynx'], outputFormat: 'webp' });
    const webp = await images(id);
    expect(webp.tasks.map((t: any) => t.resultUrls[0].endsWith('.webp'))).toEqual([true, true]);
    expect(webp.files.map((f) => f.type)).toEqual([expect.stringContaining('image/webp'), expect.stringContaining('image/webp')]);
    expect((await sharp(webp.files[0].body).metadata()).format).toBe('webp');

    // The archive's entries too.
    const zip = await api.http
      .get(`/v1/batches/${id}/archive`)
      .set('Authorization', bearer(a))
      .buffer(true)
      .parse((r, cb) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => cb(null, Buffer.concat(chunks)));
      });
    const names = [...(zip.body as Buffer).toString('latin1').matchAll(/images\/[0-9]{4}-[a-z0-9-]+\.([a-z]{3,4})(?![a-z])/g)].map(
      (m) => m[1],
    );
    expect(new Set(names)).toEqual(new Set(['webp']));
  });

  it('estimate takes both; a bad seed or format is invalid_request and creates nothing', async () => {
    const est = await api.http
      .post('/v1/batches/estimate')
      .set('Authorization', bearer(a))
      .send({ model: 'eta-image', prompts: ['x'], seed: 7, outputFormat: 'webp' });
    expect(est.status).toBe(200);
    expect(est.body.creditsRequired).toBeGreaterThan(0);
    const before = await batchCount(api, a.id);
    for (const bad of [{ seed: -1 }, { seed: 2 ** 31 }, { seed: 1.5 }, { seed: '7' }, { outputFormat: 'gif' }]) {
      const res = await postBatch(api, a, { model: 'eta-image', prompts: ['x'], ...bad });
      expect({ bad, status: res.status, code: res.body.error?.code }).toEqual({ bad, status: 400, code: 'invalid_request' });
      const e = await api.http
        .post('/v1/batches/estimate')
        .set('Authorization', bearer(a))
        .send({ model: 'eta-image', prompts: ['x'], ...bad });
      expect(e.status).toBe(400);
    }
    expect(await batchCount(api, a.id)).toBe(before);
  });
});
