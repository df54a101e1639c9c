import { TestingModule } from '@nestjs/testing';
import { buildConfig } from '@app/config';
import { ProviderRoute } from '@app/database';
import {
  OpenAiFakeUpstream,
  TestAccount,
  TestApp,
  createBatchVia,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  refundRows,
  taskRows,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

const KEY = 'sk-test-kiln-sizes';

jest.setTimeout(60_000);

/**
 * v1.2 on the openai type: gpt-image-1 routes need no sizeMap (the nearest legal size is
 * sent, the task says what came back), and gpt-image's moderation refusal is content_refused.
 */
describe('generator: the openai type picks gpt-image sizes and recognises its refusals', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  const upstream = new OpenAiFakeUpstream();

  const batchVia = (model: string, r: ProviderRoute, body: Record<string, unknown>): Promise<string> =>
    createBatchVia(api, a, model, r, body);

  beforeAll(async () => {
    await upstream.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('gen_openai_sizes', {
      providerApiKeys: { OPENAI_API_KEY: KEY },
      upstream: { ...base.upstream, allowPrivate: true },
      generator: { concurrency: 4, maxAttempts: 3, backoffMs: 50, reconcileIntervalMs: 600_000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    a = await api.account({ plan: 'scale', credits: 5000 });
    // gpt-image-1 makes 3:2 at 1K only: the model offers just that pair (honest sizes).
    await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ resolutionsByRatio: { '3:2': ['1K'] } })
      .expect(200);
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await upstream.stop();
    await env?.teardown();
  });

  it('sends 1536x1024 for Kiln 3:2 (1248x832) without a sizeMap; the task reports 1536x1024', async () => {
    const before = upstream.requests.length;
    const id = await batchVia(
      'delta',
      { type: 'openai', baseUrl: upstream.baseUrl, model: 'gpt-image-1' },
      { prompts: ['A kite'], aspectRatio: '3:2' },
    );
    await waitForBatchDone(api, id);
    const [seen] = upstream.requests.slice(before);
    expect(seen.path).toBe('/v1/images/generations');
    expect(JSON.parse(seen.body.toString())).toMatchObject({ model: 'gpt-image-1', size: '1536x1024' });
    const { tasks } = await getBatch(api, a, id);
    expect(tasks[0]).toMatchObject({ status: 'succeeded', width: 1536, height: 1024 });
  });

  it("a route by the gpt-image-1 preset records the cost of the answer's usage tokens, not a flat 1K price", async () => {
    const id = await batchVia('delta', { preset: 'openai/gpt-image-1', baseUrl: upstream.baseUrl } as unknown as ProviderRoute, {
      prompts: ['A kite at dusk'],
      aspectRatio: '3:2',
    });
    await waitForBatchDone(api, id);
    const [task] = await api.db.query(`SELECT result_width, result_height, upstream_cost_micros FROM tasks WHERE batch_id = $1`, [id]);
    expect(task).toMatchObject({ result_width: 1536, result_height: 1024 });
    // The fake answers usage as OpenAI does: 20 input text tokens at USD 5 and, for 1536x1024 at
    // medium (the fake's auto), 1568 output image tokens at USD 40 per million.
    expect(Number(task.upstream_cost_micros)).toBe(Math.round(20 * 5 + 1568 * 40));
  });

  it('moderation_blocked fails at once with content_refused, refunded once', async () => {
    const before = upstream.requests.length;
    upstream.answerNext(OpenAiFakeUpstream.refusal('moderation_blocked'));
    const id = await batchVia(
      'delta',
      { type: 'openai', baseUrl: upstream.baseUrl, model: 'gpt-image-1' },
      { prompts: ['Refused'], aspectRatio: '3:2' },
    );
    await waitForBatchDone(api, id);
    expect((await taskRows(api, id))[0]).toMatchObject({ status: 'failed', attempts: 1, error_code: 'content_refused' });
    expect(upstream.requests.length - before).toBe(1);
    expect(await refundRows(api, id)).toHaveLength(1);
  });
});
