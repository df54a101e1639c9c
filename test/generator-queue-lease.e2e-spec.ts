import { TestingModule } from '@nestjs/testing';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import sharp from 'sharp';
import { buildConfig } from '@app/config';
import { ProviderRoute } from '@app/database';
import { UpstreamWaitStore } from '@app/tasks';
import {
  FakeQueueUpstream,
  fakeQueueUpstream,
  createBatchVia,
  download,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  TestAccount,
  TestApp,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

jest.setTimeout(90_000);

/**
 * A waiting task the poller takes from PostgreSQL (UpstreamWaitStore.lease: recorded while the
 * poller had no room, given back at a shutdown, or a dead generator's) renders as its batch
 * asked, the output format included, like one the submitting worker handed to its own poller.
 */
describe('generator: queue upstream tasks taken through a lease keep their batch', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  let fake: FakeQueueUpstream;
  /** Ids of the tasks the poller leased from PostgreSQL. */
  const leased = new Set<string>();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-gen-queue-lease-'));

  beforeAll(async () => {
    fake = fakeQueueUpstream('fal', { queueMs: 1500 });
    await fake.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('gen_queue_lease', {
      upstream: { ...base.upstream, allowPrivate: true },
      storage: { ...base.storage, dataDir },
      providerApiKeys: { FAL_KEY: 'fal-test-key:secret' },
      // One worker submits the tasks one by one, and the poller holds one: every task after
      // the first (submitted while the first is still in the upstream's queue) is recorded for
      // any poller, and reaches this one through a lease.
      generator: { concurrency: 1, upstreamPollerCapacity: 1, maxAttempts: 3, backoffMs: 50, reconcileIntervalMs: 600_000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    const store = gen.get(UpstreamWaitStore);
    const lease = store.lease.bind(store);
    jest.spyOn(store, 'lease').mockImplementation(async (...args: Parameters<UpstreamWaitStore['lease']>) => {
      const rows = await lease(...args);
      for (const row of rows) leased.add(row.id);
      return rows;
    });
    a = await api.account({ plan: 'scale', credits: 10_000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await fake?.stop();
    await env?.teardown();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it.each([
    ['webp', 'webp', 'image/webp'],
    ['jpeg', 'jpg', 'image/jpeg'],
  ] as const)('outputFormat %s: every task stored, served and named in that format, the leased ones too', async (format, ext, type) => {
    const route = { preset: 'fal/fal-ai/flux/dev', baseUrl: fake.baseUrl, pollIntervalMs: 100 } as unknown as ProviderRoute;
    const prompts = [1, 2, 3, 4].map((n) => `${format} lighthouse ${n}`);
    const id = await createBatchVia(api, a, 'eta-image', route, { prompts, outputFormat: format });
    await waitForBatchDone(api, id, 60_000);

    const { batch, tasks } = await getBatch(api, a, id);
    expect(batch).toMatchObject({ status: 'succeeded', outputFormat: format });
    expect(tasks.filter((t) => leased.has(t.id)).length).toBeGreaterThanOrEqual(2);
    const stored = await Promise.all(
      tasks.map(async (task) => {
        const file = await download(api, task.resultUrls[0]);
        return {
          index: task.index,
          name: path.extname(task.resultUrls[0]),
          type: file.type.split(';')[0],
          format: (await sharp(file.body).metadata()).format,
        };
      }),
    );
    expect(stored).toEqual(tasks.map((task) => ({ index: task.index, name: `.${ext}`, type, format })));
  });
});
