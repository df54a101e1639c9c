import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { buildConfig } from '@app/config';
import { batchCount, routeModel, solidPng, TestAccount } from '@app/testing';
import { LiveKiln, startLiveKiln } from './helpers/live-kiln';

jest.setTimeout(180_000);

/** The OpenAI-compatible door, driven by the official `openai` package as any OpenAI client would. */
describe('OpenAI-compatible images door', () => {
  let kiln: LiveKiln;
  let a: TestAccount;
  let openai: OpenAI;
  const balance = async () => (await kiln.api.db.query(`SELECT balance::int AS n FROM accounts WHERE id = $1`, [a.id]))[0].n as number;

  beforeAll(async () => {
    kiln = await startLiveKiln('openai_door', {
      generator: { ...buildConfig(process.env).generator, concurrency: 4, maxAttempts: 2, backoffMs: 20 },
    });
    a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    openai = new OpenAI({ baseURL: `${kiln.url}/v1`, apiKey: a.key, maxRetries: 0, timeout: 150_000 });
  });
  afterAll(() => kiln?.close());

  it('images.generate: a normal batch, charged and listed; urls by default, b64_json on request; size to the nearest legal pair', async () => {
    const before = await balance();
    const byUrl = await openai.images.generate({ model: 'eta-image', prompt: 'a red fox in the snow', n: 2, size: '1536x1024' });
    expect(byUrl.created).toBeGreaterThan(1_700_000_000);
    expect(byUrl.data).toHaveLength(2);
    const res = await fetch(byUrl.data![0].url!);
    expect(res.status).toBe(200);
    const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
    // 1536x1024 is 3:2; the nearest legal pair of eta-image keeps the shape.
    expect(meta.width! / meta.height!).toBeCloseTo(1.5, 1);

    const inline = await openai.images.generate({ model: 'eta-image', prompt: 'a lighthouse', response_format: 'b64_json', output_format: 'webp' });
    expect(inline.data).toHaveLength(1);
    expect((await sharp(Buffer.from(inline.data![0].b64_json!, 'base64')).metadata()).format).toBe('webp');

    const listed = await kiln.api.http.get('/v1/batches').set('Authorization', `Bearer ${a.key}`).expect(200);
    expect(listed.body.batches.map((b: any) => b.countPerCombo).sort()).toEqual([1, 2]);
    const charged = listed.body.batches.reduce((sum: number, b: any) => sum + b.creditsCharged, 0);
    expect(await balance()).toBe(before - charged);
  });

  it('images.edit: the files are the batch references (combined)', async () => {
    const red = await toFile(await solidPng(64, 64, { r: 255, g: 0, b: 0 }), 'red.png', { type: 'image/png' });
    const blue = await toFile(await solidPng(64, 64, { r: 0, g: 0, b: 255 }), 'blue.png', { type: 'image/png' });
    const edited = await openai.images.edit({ model: 'eta-image', image: [red, blue], prompt: 'the two together', n: 1, response_format: 'b64_json' });
    expect(edited.data).toHaveLength(1);
    expect((await sharp(Buffer.from(edited.data![0].b64_json!, 'base64')).metadata()).format).toBe('png');
    const [latest] = (await kiln.api.http.get('/v1/batches?limit=1').set('Authorization', `Bearer ${a.key}`).expect(200)).body.batches;
    expect(latest).toMatchObject({ refMode: 'combined', prompts: ['the two together'] });
    expect(latest.refImages).toHaveLength(2);
  });

  it('no image succeeded: generation_failed (502, server_error) naming the batch, every image refunded', async () => {
    // A model no other spec routes: its route fails every render while this request runs.
    // It has no 1:1 at 1K: 1024x1024 maps to its nearest legal pair.
    const restore = await routeModel(kiln.api, 'gamma-4-5', { type: 'simulated', latencyMs: 5, failureRate: 1 });
    const before = await balance();
    let err: InstanceType<typeof OpenAI.APIError>;
    try {
      err = (await openai.images.generate({ model: 'gamma-4-5', prompt: 'doomed', n: 2, size: '1024x1024' }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    } finally {
      await restore();
    }
    expect(err.status).toBe(502);
    expect(err.error).toMatchObject({ code: 'generation_failed', type: 'server_error', details: { batchId: expect.any(String) } });
    const batch = (await kiln.api.http.get(`/v1/batches/${(err.error as any).details.batchId}`).set('Authorization', `Bearer ${a.key}`).expect(200)).body.batch;
    expect(batch).toMatchObject({ status: 'failed', creditsRefunded: batch.creditsCharged });
    expect(await balance()).toBe(before);
  });

  it("errors keep Kiln's code and message and add OpenAI's type and param; nothing is created", async () => {
    const before = await batchCount(kiln.api, a.id);
    const err = await openai.images.generate({ model: 'no-such-model', prompt: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    const apiError = err as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(400);
    expect(apiError.error).toMatchObject({ code: 'unknown_model', type: 'invalid_request_error', param: 'model', message: expect.stringContaining('no-such-model') });
    const badSize = (await openai.images.generate({ model: 'eta-image', prompt: 'x', size: 'big' as any }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(badSize.error).toMatchObject({ code: 'invalid_request', param: 'size' });
    const tooMany = (await openai.images.generate({ model: 'eta-image', prompt: 'x', n: 11 }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(tooMany.error).toMatchObject({ code: 'invalid_request', param: 'n' });
    const noKey = new OpenAI({ baseURL: `${kiln.url}/v1`, apiKey: 'kiln_live_nope', maxRetries: 0 });
    const unauth = (await noKey.images.generate({ model: 'eta-image', prompt: 'x' }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(unauth.status).toBe(401);
    expect(unauth.error).toMatchObject({ type: 'authentication_error' });
    expect(await batchCount(kiln.api, a.id)).toBe(before);
  });
});

/** The door's wait (OPENAI_COMPAT_WAIT_MS) running out, on a Kiln whose wait is short. */
describe('OpenAI-compatible images door: past OPENAI_COMPAT_WAIT_MS', () => {
  let kiln: LiveKiln;
  let a: TestAccount;

  beforeAll(async () => {
    kiln = await startLiveKiln('openai_door_wait', { openaiCompat: { waitMs: 1000 } });
    a = await kiln.api.account({ plan: 'scale', credits: 1000 });
  });
  afterAll(() => kiln?.close());

  it('answers 504 generation_timeout naming the batch, tells the client not to retry (one batch, charged once), and the batch goes on to succeed', async () => {
    // Each image takes 4 s upstream: well past the 1 s wait.
    await routeModel(kiln.api, 'gamma-4-5', { type: 'simulated', latencyMs: 4000 });
    const before = await kiln.api.db.query(`SELECT balance::int AS n FROM accounts WHERE id = $1`, [a.id]);
    const batches = await batchCount(kiln.api, a.id);
    // The client's defaults: it retries a 5xx twice unless the answer says not to.
    const openai = new OpenAI({ baseURL: `${kiln.url}/v1`, apiKey: a.key, timeout: 60_000 });
    const err = (await openai.images.generate({ model: 'gamma-4-5', prompt: 'a slow one', n: 2, size: '1024x1024' }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.status).toBe(504);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(err.error).toMatchObject({ code: 'generation_timeout', type: 'server_error', param: null, details: { batchId: expect.any(String) } });
    expect((err.error as any).message).toContain(`GET /v1/batches/${(err.error as any).details.batchId}`);
    // No retry made a second batch.
    expect(await batchCount(kiln.api, a.id)).toBe(batches + 1);

    // The batch was not cancelled: it runs to the end, charged once, nothing refunded.
    const id = (err.error as any).details.batchId as string;
    let batch: any;
    for (let etag: string | undefined; ; ) {
      const req = kiln.api.http.get(`/v1/batches/${id}`).set('Authorization', `Bearer ${a.key}`).set('Prefer', 'wait=10');
      const res = await (etag ? req.set('If-None-Match', etag) : req);
      etag = res.headers.etag;
      if (res.status === 200) batch = res.body.batch;
      if (batch?.done) break;
    }
    expect(batch).toMatchObject({ status: 'succeeded', total: 2, creditsRefunded: 0 });
    expect(batch.creditsCharged).toBeGreaterThan(0);
    const after = await kiln.api.db.query(`SELECT balance::int AS n FROM accounts WHERE id = $1`, [a.id]);
    expect(after[0].n).toBe(before[0].n - batch.creditsCharged);
  });
});
