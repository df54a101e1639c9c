import { TestingModule } from '@nestjs/testing';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import sharp from 'sharp';
import { buildConfig, KilnConfig } from '@app/config';
import { ProviderRoute } from '@app/database';
import {
  FakeQueueUpstream,
  fakeQueueUpstream,
  QueueTypeName,
  bearer,
  createBatchVia,
  download,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  refundRows,
  solidPng,
  taskRows,
  TestAccount,
  TestApp,
  upload,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';
import { LocalServer } from './helpers/local-server';

const KEYS: Record<QueueTypeName, { env: string; value: string; header: string; expect: string }> = {
  fal: { env: 'FAL_KEY', value: 'fal-test-key:secret', header: 'authorization', expect: 'Key fal-test-key:secret' },
  replicate: { env: 'REPLICATE_API_TOKEN', value: 'r8_testtoken', header: 'authorization', expect: 'Bearer r8_testtoken' },
  bfl: { env: 'BFL_API_KEY', value: 'bfl-test-key', header: 'x-key', expect: 'bfl-test-key' },
};

/** The upstream model each type is routed to in these tests. */
const MODEL: Record<QueueTypeName, string> = { fal: 'fal-ai/flux/dev', replicate: 'black-forest-labs/flux-schnell', bfl: 'flux-pro-1.1' };
/** Where each type's fake takes a reference image, and in what form. */
const REFERENCE_FIELD: Record<QueueTypeName, string> = { fal: 'image_urls', replicate: 'input_image', bfl: 'image_prompt' };

/** Stands for anything internal the generator can reach: it must never be asked for anything. */
class InternalService extends LocalServer {
  hits = 0;
  protected handle(_req: http.IncomingMessage, res: http.ServerResponse): void {
    this.hits++;
    res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.alloc(16));
  }
}

jest.setTimeout(90_000);

describe('generator: queue upstreams (fal, Replicate, BFL) against local fakes', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  const internal = new InternalService();
  const fakes = {} as Record<QueueTypeName, FakeQueueUpstream>;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-gen-queue-'));

  /** By preset (the model's pairs narrow to what it makes honestly), on the type's fake. */
  const route = (dialect: QueueTypeName, extra: Record<string, unknown> = {}): ProviderRoute =>
    ({
      preset: `${dialect}/${MODEL[dialect]}`,
      baseUrl: fakes[dialect].baseUrl,
      pollIntervalMs: 100,
      ...extra,
    }) as unknown as ProviderRoute;

  const batchVia = (model: string, r: ProviderRoute, body: Record<string, unknown>): Promise<string> =>
    createBatchVia(api, a, model, r, body);

  beforeAll(async () => {
    await internal.start();
    for (const dialect of ['fal', 'replicate', 'bfl'] as const) {
      fakes[dialect] = fakeQueueUpstream(dialect, { queueMs: 300, privateImageBase: internal.base });
      await fakes[dialect].start();
    }
    const base = buildConfig(process.env);
    env = await fileEnvironment('gen_queue', {
      upstream: { ...base.upstream, allowPrivate: true },
      storage: { ...base.storage, dataDir },
      providerApiKeys: Object.fromEntries(Object.values(KEYS).map((k) => [k.env, k.value])),
      generator: { concurrency: 4, maxAttempts: 3, backoffMs: 50, reconcileIntervalMs: 600_000 },
    });
    config = env.config;
    api = await bootApi(config);
    gen = await bootGenerator(config);
    a = await api.account({ plan: 'scale', credits: 100_000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    for (const fake of Object.values(fakes)) await fake?.stop();
    await internal.stop();
    await env?.teardown();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  describe.each(['fal', 'replicate', 'bfl'] as const)('%s', (dialect) => {
    const fake = () => fakes[dialect];
    const tag = (s: string) => `${dialect} ${s}`;

    it('success with a reference: one submit with the key, the reference and the size; the image stored; the request id recorded', async () => {
      const ref = await solidPng(64, 64, { r: 0, g: 200, b: 0 });
      const refs = [await upload(api, a, ref, 'green.png')];
      const prompt = tag('a lighthouse [ok]');
      const id = await batchVia('alpha-image-2-5', route(dialect), {
        prompts: [prompt],
        aspectRatio: '16:9',
        refMode: 'combined',
        refImages: refs,
      });
      await waitForBatchDone(api, id);

      expect(fake().submitsFor(prompt)).toBe(1);
      const submit = fake().seen.find((s) => s.method === 'POST' && JSON.stringify(s.body).includes(prompt))!;
      expect(submit.headers[KEYS[dialect].header]).toBe(KEYS[dialect].expect);
      const input = (dialect === 'replicate' ? submit.body!.input : submit.body) as Record<string, unknown>;
      expect(input.prompt).toBe(prompt);
      const sent = input[REFERENCE_FIELD[dialect]];
      const b64 = ref.toString('base64');
      if (dialect === 'fal') expect(sent).toEqual([`data:image/png;base64,${b64}`]);
      else if (dialect === 'replicate') expect(sent).toBe(`data:image/png;base64,${b64}`);
      else expect(sent).toBe(b64);
      // Sizes: fal takes Kiln's own, BFL multiples of 32, Replicate the nearest ratio.
      const expected = { fal: { width: 1360, height: 768 }, replicate: { width: 1024, height: 576 }, bfl: { width: 1376, height: 768 } }[
        dialect
      ];
      if (dialect === 'fal') expect(input.image_size).toEqual(expected);
      if (dialect === 'bfl') expect({ width: input.width, height: input.height }).toEqual(expected);
      if (dialect === 'replicate') expect(input.aspect_ratio).toBe('16:9');

      const { batch, tasks } = await getBatch(api, a, id);
      expect(batch).toMatchObject({ status: 'succeeded' });
      expect(tasks[0]).toMatchObject({ status: 'succeeded', ...expected, errorCode: null });
      expect(tasks[0]).not.toHaveProperty('upstreamRequestId');
      const file = await download(api, tasks[0].resultUrls[0]);
      expect(await sharp(file.body).metadata()).toMatchObject({ ...expected, format: 'png' });
      const [row] = await taskRows(api, id);
      expect(row.upstream_request_id).toMatch(/^req-/);
      expect(row.attempts).toBe(1);
      // Its upstream cost: the preset's list price at 1K, taken as the route's cost.
      expect(Number(row.upstream_cost_micros)).toBe({ fal: 25_000, replicate: 3_000, bfl: 40_000 }[dialect]);
      // Operators see the upstream's request id; the owner (above) never does.
      const admin = await api.admin('get', `/v1/admin/batches/${id}`).expect(200);
      expect(admin.body.tasks[0]).toMatchObject({ id: tasks[0].id, upstreamRequestId: row.upstream_request_id });
    });

    it.each(dialect === 'fal' ? ['[refuse]', '[refuse-submit]', '[nsfw]'] : ['[refuse]', '[refuse-submit]'])(
      'a content refusal (%s) fails the task at once: content_refused, refunded, never submitted again',
      async (marker) => {
        const prompt = tag(`forbidden ${marker}`);
        const id = await batchVia('beta-2', route(dialect), { prompts: [prompt] });
        await waitForBatchDone(api, id);
        const { tasks } = await getBatch(api, a, id);
        expect(tasks[0]).toMatchObject({ status: 'failed', errorCode: 'content_refused' });
        const [row] = await taskRows(api, id);
        expect(row.attempts).toBe(1);
        expect(fake().submitsFor(prompt)).toBe(marker === '[refuse-submit]' ? 0 : 1);
        expect(await refundRows(api, id)).toHaveLength(1);
        // fal bills its 422s and the runs its safety checker flagged (the preset's list price,
        // the route's cost: fal-ai/flux/dev at 1K, USD 0.025); Replicate and BFL bill no refusal.
        expect(Number(row.upstream_cost_micros)).toBe(dialect === 'fal' ? 25_000 : 0);
      },
    );

    it('429 with Retry-After: the next submit waits for it within the same attempt (route pacing); 5xx and a timeout are retried; a poll that fails is polled again', async () => {
      const prompts = [tag('busy [429-once]'), tag('broken [500-once]'), tag('slow [hang-once]'), tag('flaky poll [poll-500]')];
      const id = await batchVia('beta-2', route(dialect, { timeoutMs: 1500 }), { prompts });
      await waitForBatchDone(api, id, 60_000);
      const { tasks } = await getBatch(api, a, id);
      expect(tasks.map((t) => t.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
      const rows = await taskRows(api, id);
      // The 429 is Kiln going too fast for the route: asked again without spending an attempt.
      expect(rows.map((r) => r.attempts)).toEqual([1, 2, 2, 1]);
      for (const p of prompts) expect(fake().submitsFor(p)).toBe(1);
      const busy = fake().seen.filter((s) => s.method === 'POST' && JSON.stringify(s.body).includes(prompts[0]));
      expect(busy).toHaveLength(2);
      expect(busy[1].at - busy[0].at).toBeGreaterThanOrEqual(950);
    });

    it("the upstream's own failure answer starts a new attempt: a second submit, then success", async () => {
      const prompt = tag('unlucky [fail-once]');
      const id = await batchVia('beta-2', route(dialect), { prompts: [prompt] });
      await waitForBatchDone(api, id);
      const [row] = await taskRows(api, id);
      expect(row).toMatchObject({ status: 'succeeded', attempts: 2 });
      expect(fake().submitsFor(prompt)).toBe(2);
    });

    it('an answer that is not an image, and a result URL to a refused address, fail the task without fetching anything internal', async () => {
      const before = internal.hits;
      const id = await batchVia('beta-2', route(dialect), { prompts: [tag('junk [not-image]'), tag('sneaky [private-url]')] });
      await waitForBatchDone(api, id);
      const { tasks } = await getBatch(api, a, id);
      expect(tasks.map((t) => [t.status, t.errorCode])).toEqual([
        ['failed', 'upstream_unavailable'],
        ['failed', 'upstream_unavailable'],
      ]);
      expect(tasks[0].error).toMatch(/not a PNG, JPEG or WebP/);
      expect(tasks[1].error).toMatch(/refused/);
      expect(internal.hits).toBe(before);
      expect(await refundRows(api, id)).toHaveLength(2);
    });
  });

  it('waiting holds no worker: 12 tasks on 4 workers are all submitted while the first still waits upstream', async () => {
    const slow = fakeQueueUpstream('fal', { queueMs: 4000 });
    await slow.start();
    try {
      const prompts = Array.from({ length: 12 }, (_, i) => `patient ${i}`);
      const id = await batchVia('eta-image', { ...route('fal'), baseUrl: slow.baseUrl } as ProviderRoute, { prompts });
      const rows = await waitFor(
        '12 submits recorded',
        async () => {
          const r = await taskRows(api, id);
          return r.every((t) => t.upstream_request_id) ? r : null;
        },
        30_000,
        20,
      );
      const allSubmitted = Date.now();
      expect(rows.filter((r) => r.status === 'succeeded')).toHaveLength(0);
      expect(rows.every((r) => r.status === 'running')).toBe(true);
      await waitForBatchDone(api, id, 30_000);
      expect(Date.now() - allSubmitted).toBeGreaterThan(1000);
      expect(slow.submits).toBe(12);
    } finally {
      await slow.stop();
    }
  });

  // fal's and Replicate's cancels reach the upstream (upstream-cancel.e2e-spec.ts); BFL has none.
  it('cancel leaves tasks submitted to an upstream without a cancel (BFL) running: they finish and are not refunded', async () => {
    const slow = fakeQueueUpstream('bfl', { queueMs: 2000 });
    await slow.start();
    try {
      const prompts = ['kept 1', 'kept 2', 'kept 3'];
      const id = await batchVia('eta-image', { ...route('bfl'), baseUrl: slow.baseUrl } as ProviderRoute, { prompts });
      await waitFor('3 submits', () => slow.submits === 3, 30_000, 20);
      await waitFor('recorded', async () => (await taskRows(api, id)).every((r) => r.upstream_request_id), 10_000, 20);
      const res = await api.http.post(`/v1/batches/${id}/cancel`).set('Authorization', bearer(a));
      expect(res.status).toBe(200);
      expect(res.body.counts).toMatchObject({ running: 3, cancelling: 0 });
      await waitForBatchDone(api, id, 30_000);
      const rows = await taskRows(api, id);
      expect(rows.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
      expect(rows.every((r) => r.upstream_cancel === null)).toBe(true);
      expect(await refundRows(api, id)).toHaveLength(0);
    } finally {
      await slow.stop();
    }
  });
});
