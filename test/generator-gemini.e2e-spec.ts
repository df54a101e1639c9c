import { TestingModule } from '@nestjs/testing';
import sharp from 'sharp';
import { buildConfig } from '@app/config';
import { ProviderRoute } from '@app/database';
import {
  GeminiFakeUpstream,
  TestAccount,
  TestApp,
  createBatchVia,
  download,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  refundRows,
  solidPng,
  taskRows,
  upload,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

const GEMINI_KEY = 'gm-test-kiln-upstream';

jest.setTimeout(60_000);

/** The gemini route type end to end: api, a real generator, PostgreSQL, Redis, a fake Gemini on 127.0.0.1. */
describe('generator: the gemini provider against a local upstream', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  const upstream = new GeminiFakeUpstream();

  const route = (extra: Record<string, unknown> = {}): ProviderRoute => ({
    type: 'gemini',
    baseUrl: upstream.baseUrl,
    model: 'gemini-3.1-flash-image',
    ...extra,
  });

  const batchVia = (model: string, r: ProviderRoute, body: Record<string, unknown>): Promise<string> =>
    createBatchVia(api, a, model, r, body);

  const calls = () => upstream.requests.length;

  beforeAll(async () => {
    await upstream.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('gen_gemini', {
      upstream: { ...base.upstream, allowPrivate: true },
      providerApiKeys: { GEMINI_API_KEY: GEMINI_KEY },
      generator: { concurrency: 4, maxAttempts: 3, backoffMs: 50, modelConcurrencyCap: 2, reconcileIntervalMs: 600_000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    a = await api.account({ plan: 'scale', credits: 5000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await upstream.stop();
    await env?.teardown();
  });

  it('success with references: the key header, the references inline, and the size that came back', async () => {
    const green = await solidPng(32, 32, { r: 0, g: 255, b: 0 });
    const refs = [await upload(api, a, green, 'green.png')];
    const before = calls();
    const id = await batchVia('gamma-5-pro', route(), {
      prompts: ['A harbour at dawn'],
      aspectRatio: '16:9',
      resolution: '2K',
      refMode: 'combined',
      refImages: refs,
    });
    await waitForBatchDone(api, id);
    const { batch, tasks } = await getBatch(api, a, id);
    expect(batch.status).toBe('succeeded');
    const seen = upstream.requests.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0].path).toBe('/v1beta/models/gemini-3.1-flash-image:generateContent');
    expect(seen[0].headers['x-goog-api-key']).toBe(GEMINI_KEY);
    const body = JSON.parse(seen[0].body.toString('utf8'));
    expect(body.contents[0].parts[0]).toEqual({ text: 'A harbour at dawn' });
    expect(Buffer.from(body.contents[0].parts[1].inlineData.data, 'base64').equals(green)).toBe(true);
    expect(body.generationConfig).toMatchObject({ responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '16:9', imageSize: '2K' } });
    // The fake answers 168x96 (1/8 of Gemini's 16:9): the task says so, not Kiln's 2736x1536.
    expect(tasks[0]).toMatchObject({ status: 'succeeded', width: 168, height: 96, errorCode: null });
    const file = await download(api, tasks[0].resultUrls[0]);
    expect(await sharp(file.body).metadata()).toMatchObject({ width: 168, height: 96, format: 'png' });
  });

  it.each([
    ['promptFeedback.blockReason', () => GeminiFakeUpstream.blocked('PROHIBITED_CONTENT')],
    ['finishReason IMAGE_SAFETY', () => GeminiFakeUpstream.finished('IMAGE_SAFETY')],
    ['finishReason SAFETY', () => GeminiFakeUpstream.finished('SAFETY')],
  ])('a refusal by %s fails at once with content_refused, refunded once', async (_what, refusal) => {
    const balance = await api.balance(a.id);
    const before = calls();
    upstream.answerNext(refusal());
    const id = await batchVia('gamma-5-pro', route(), { prompts: ['Something refused'] });
    await waitForBatchDone(api, id);
    const [task] = await taskRows(api, id);
    expect(task).toMatchObject({ status: 'failed', attempts: 1, error_code: 'content_refused' });
    expect(calls() - before).toBe(1);
    expect(await refundRows(api, id)).toHaveLength(1);
    expect(await api.balance(a.id)).toBe(balance);
    expect(await api.ledgerSum(a.id)).toBe(balance);
  });

  it('429 with Retry-After: asked again after it within the same attempt (route pacing), one charge, no refund', async () => {
    const before = calls();
    upstream.answerNext({
      status: 429,
      headers: { 'content-type': 'application/json', 'retry-after': '1' },
      body: JSON.stringify({ error: { code: 429, message: 'Resource exhausted', status: 'RESOURCE_EXHAUSTED' } }),
    });
    const id = await batchVia('gamma-5-pro', route(), { prompts: ['Busy once'] });
    await waitForBatchDone(api, id);
    const [task] = await taskRows(api, id);
    expect(task).toMatchObject({ status: 'succeeded', attempts: 1 });
    const [first, second] = upstream.requests.slice(before);
    expect(calls() - before).toBe(2);
    // Retry-After: 1 s (the refused call's own backoff is 100 ms).
    expect(second.receivedAt - first.receivedAt).toBeGreaterThanOrEqual(950);
    expect(await refundRows(api, id)).toHaveLength(0);
  });

  it('5xx and timeouts are retried until the attempts run out, then failed and refunded once', async () => {
    const overloaded = {
      status: 503,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ error: { code: 503, message: 'The model is overloaded', status: 'UNAVAILABLE' } }),
    };
    let before = calls();
    upstream.answerNext(overloaded, overloaded, overloaded);
    const down = await batchVia('gamma-5-pro', route(), { prompts: ['Overloaded'] });
    await waitForBatchDone(api, down);
    expect((await taskRows(api, down))[0]).toMatchObject({
      status: 'failed',
      attempts: 3,
      error: 'Upstream error (503): The model is overloaded (gave up after 3 attempts)',
      error_code: 'upstream_unavailable',
    });
    expect(calls() - before).toBe(3);
    expect(await refundRows(api, down)).toHaveLength(1);

    before = calls();
    upstream.answerNext('hang', 'hang', 'hang');
    const slow = await batchVia('gamma-5-pro', route({ timeoutMs: 300 }), { prompts: ['Never answers'] });
    await waitForBatchDone(api, slow);
    expect((await taskRows(api, slow))[0]).toMatchObject({ status: 'failed', attempts: 3, error_code: 'upstream_unavailable' });
    expect(calls() - before).toBe(3);
    expect(await refundRows(api, slow)).toHaveLength(1);
  });

  it('an answer that is not an image fails the task, refunded', async () => {
    const before = calls();
    upstream.answerNext(GeminiFakeUpstream.image(Buffer.from('<html>not an image</html>')));
    const id = await batchVia('gamma-5-pro', route(), { prompts: ['Garbage back'] });
    await waitForBatchDone(api, id);
    const [task] = await taskRows(api, id);
    expect(task).toMatchObject({
      status: 'failed',
      attempts: 1,
      error: 'The image provider returned data that is not a PNG, JPEG or WebP image',
      error_code: 'upstream_unavailable',
    });
    expect(calls() - before).toBe(1);
    expect(await refundRows(api, id)).toHaveLength(1);
  });
});
