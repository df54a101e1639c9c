import { TestingModule } from '@nestjs/testing';
import { buildConfig } from '@app/config';
import {
  createBatch,
  fileEnvironment,
  FileEnvironment,
  OpenAiFakeUpstream,
  taskRows,
  TestAccount,
  TestApp,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

/** Far longer than the batch takes on the fallback: a retry that waited it out would miss the wait below. */
const BACKOFF_MS = 60_000;

/**
 * A task moved on to a later route of its chain goes there at once: the retry backoff (and a
 * Retry-After) is the failing route's, which its next attempt no longer calls. Moved back
 * around to the first route, it waits the backoff as any retry.
 */
describe('failover: a move to a later route does not wait out the retry backoff', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  const primary = new OpenAiFakeUpstream();
  const fallback = new OpenAiFakeUpstream();

  beforeAll(async () => {
    await primary.start();
    await fallback.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('route_failover_backoff', {
      upstream: { ...base.upstream, allowPrivate: true },
      providerApiKeys: { OPENAI_API_KEY: 'sk-test-failover' },
      generator: { concurrency: 4, maxAttempts: 3, backoffMs: BACKOFF_MS, reconcileIntervalMs: 600_000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    a = await api.account({ plan: 'scale', credits: 10_000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await primary.stop();
    await fallback.stop();
    await env?.teardown();
  });

  it('the primary answering 503 (with a Retry-After of a minute): every task made by the fallback well within one backoff', async () => {
    await api
      .admin('post', '/v1/admin/models')
      .send({
        key: 'failover-backoff',
        displayName: 'failover-backoff',
        creditCost: { '1K': 2 },
        resolutionsByRatio: { '1:1': ['1K'] },
        routes: [
          { type: 'openai', baseUrl: primary.baseUrl, model: 'gpt-image-1' },
          { type: 'openai', baseUrl: fallback.baseUrl, model: 'gpt-image-1' },
        ],
        // The circuit stays closed: every task fails on the primary once, then moves.
        failover: { failuresToOpen: 1000 },
      })
      .expect(201);
    for (let i = 0; i < 4; i++)
      primary.answerNext({ status: 503, body: JSON.stringify({ error: { message: 'down' } }), headers: { 'retry-after': '60' } });
    const id = await createBatch(api, a, {
      model: 'failover-backoff',
      prompts: Array.from({ length: 4 }, (_, i) => `backoff ${i}`),
      aspectRatio: '1:1',
      resolution: '1K',
    });
    await waitForBatchDone(api, id, BACKOFF_MS / 3);
    const tasks = await taskRows(api, id);
    expect(tasks.map((t) => [t.status, (t as unknown as { route_index: number }).route_index])).toEqual(tasks.map(() => ['succeeded', 1]));
    expect(primary.requests).toHaveLength(4);
  });
});
