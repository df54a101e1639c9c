import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { buildConfig } from '@app/config';
import { batchCount, json, OpenAiFakeUpstream, routeModel, solidPng, TestAccount } from '@app/testing';
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
    expect(meta.width / meta.height).toBeCloseTo(1.5, 1);

    const inline = await openai.images.generate({
      model: 'eta-image',
      prompt: 'a lighthouse',
      response_format: 'b64_json',
      output_format: 'webp',
    });
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
    const edited = await openai.images.edit({
      model: 'eta-image',
      image: [red, blue],
      prompt: 'the two together',
      n: 1,
      response_format: 'b64_json',
    });
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
      err = (await openai.images
        .generate({ model: 'gamma-4-5', prompt: 'doomed', n: 2, size: '1024x1024' })
        .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    } finally {
      await restore();
    }
    expect(err.status).toBe(502);
    expect(err.error).toMatchObject({ code: 'generation_failed', type: 'server_error', details: { batchId: expect.any(String) } });
    const batch = (
      await kiln.api.http
        .get(`/v1/batches/${(err.error as any).details.batchId}`)
        .set('Authorization', `Bearer ${a.key}`)
        .expect(200)
    ).body.batch;
    expect(batch).toMatchObject({ status: 'failed', creditsRefunded: batch.creditsCharged });
    expect(await balance()).toBe(before);
  });

  it("errors keep Kiln's code and message and add OpenAI's type and param; nothing is created", async () => {
    const before = await batchCount(kiln.api, a.id);
    const err = await openai.images.generate({ model: 'no-such-model', prompt: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    const apiError = err as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(400);
    expect(apiError.error).toMatchObject({
      code: 'unknown_model',
      type: 'invalid_request_error',
      param: 'model',
      message: expect.stringContaining('no-such-model'),
    });
    const badSize = (await openai.images
      .generate({ model: 'eta-image', prompt: 'x', size: 'big' as any })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(badSize.error).toMatchObject({ code: 'invalid_request', param: 'size' });
    const tooMany = (await openai.images.generate({ model: 'eta-image', prompt: 'x', n: 11 }).catch((e: unknown) => e)) as InstanceType<
      typeof OpenAI.APIError
    >;
    expect(tooMany.error).toMatchObject({ code: 'invalid_request', param: 'n' });
    const noKey = new OpenAI({ baseURL: `${kiln.url}/v1`, apiKey: 'kiln_live_nope', maxRetries: 0 });
    const unauth = (await noKey.images.generate({ model: 'eta-image', prompt: 'x' }).catch((e: unknown) => e)) as InstanceType<
      typeof OpenAI.APIError
    >;
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
    const err = (await openai.images
      .generate({ model: 'gamma-4-5', prompt: 'a slow one', n: 2, size: '1024x1024' })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.status).toBe(504);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(err.error).toMatchObject({
      code: 'generation_timeout',
      type: 'server_error',
      param: null,
      details: { batchId: expect.any(String) },
    });
    expect((err.error as any).message).toContain(`GET /v1/batches/${(err.error as any).details.batchId}`);
    // No retry made a second batch.
    expect(await batchCount(kiln.api, a.id)).toBe(batches + 1);

    // The batch was not cancelled: it runs to the end, charged once, nothing refunded.
    const id = (err.error as any).details.batchId as string;
    let batch: any;
    for (let etag: string | undefined; ;) {
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

/**
 * The door as OpenAI answers: a model routed to a fake OpenAI upstream, driven by the official
 * `openai` client with its default retries (twice on 408, 409, 429 and 5xx unless the answer
 * carries x-should-retry: false), counting the batches made and the upstream calls.
 */
describe('OpenAI-compatible images door: answers as OpenAI does', () => {
  const MODEL = 'delta';
  let kiln: LiveKiln;
  let a: TestAccount;
  let openai: OpenAI;
  const upstream = new OpenAiFakeUpstream();
  const balance = async () => (await kiln.api.db.query(`SELECT balance::int AS n FROM accounts WHERE id = $1`, [a.id]))[0].n as number;
  const upstreamCalls = () => upstream.requests.filter((r) => r.path === '/v1/images/generations').length;
  const failure = (p: Promise<unknown>) => p.catch((e: unknown) => e) as Promise<InstanceType<typeof OpenAI.APIError>>;

  beforeAll(async () => {
    await upstream.start();
    const base = buildConfig(process.env);
    kiln = await startLiveKiln('openai_door_shape', {
      providerApiKeys: { OPENAI_API_KEY: 'sk-test-door' },
      upstream: { ...base.upstream, allowPrivate: true },
      generator: { ...base.generator, concurrency: 4, maxAttempts: 3, backoffMs: 20 },
    });
    a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    // gpt-image-1 makes 1:1 at 1K (1024x1024), with quality and transparency.
    await kiln.api
      .admin('patch', `/v1/admin/models/${MODEL}`)
      .send({
        resolutionsByRatio: { '1:1': ['1K'] },
        supportsQuality: true,
        supportsBackground: true,
        provider: { type: 'openai', baseUrl: upstream.baseUrl, model: 'gpt-image-1' },
      })
      .expect(200);
    // The client's defaults: up to two retries.
    openai = new OpenAI({ baseURL: `${kiln.url}/v1`, apiKey: a.key, timeout: 60_000 });
  });
  afterAll(async () => {
    await kiln?.close();
    await upstream.stop();
  });

  it("an upstream's content refusal: 400 moderation_blocked in OpenAI's shape, not retried (one batch, one upstream call), refunded", async () => {
    // The next call is refused (a retry, were there one, would be made and charged again).
    upstream.answerNext(OpenAiFakeUpstream.refusal());
    const [batches, calls, before] = [await batchCount(kiln.api, a.id), upstreamCalls(), await balance()];
    const err = await failure(openai.images.generate({ model: MODEL, prompt: 'something refused', size: '1024x1024' }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.status).toBe(400);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(err.error).toMatchObject({ type: 'image_generation_user_error', code: 'moderation_blocked', param: null });
    expect((err.error as { message: string }).message).toContain('rejected by the safety system');
    expect(await batchCount(kiln.api, a.id)).toBe(batches + 1);
    expect(upstreamCalls()).toBe(calls + 1);
    expect(await balance()).toBe(before);
  });

  it("Kiln's own content policy: the same 400 moderation_blocked, nothing made and nothing called", async () => {
    const [term] = (await kiln.api.admin('get', '/v1/admin/content-policy').expect(200)).body.terms as string[];
    const [batches, calls, before] = [await batchCount(kiln.api, a.id), upstreamCalls(), await balance()];
    const err = await failure(openai.images.generate({ model: MODEL, prompt: `a picture of ${term}` }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(err.error).toMatchObject({ type: 'image_generation_user_error', code: 'moderation_blocked', param: null });
    expect([await batchCount(kiln.api, a.id), upstreamCalls(), await balance()]).toEqual([batches, calls, before]);
  });

  it('x-should-retry: false on every answer a retry cannot change; none on one that may pass', async () => {
    const batches = await batchCount(kiln.api, a.id);
    const unknown = await failure(openai.images.generate({ model: 'no-such-model', prompt: 'x' }));
    expect(unknown.headers?.get('x-should-retry')).toBe('false');
    const badSize = await failure(openai.images.generate({ model: MODEL, prompt: 'x', size: 'big' as any }));
    expect(badSize.headers?.get('x-should-retry')).toBe('false');
    const poor = await kiln.api.account({ plan: 'scale', credits: 0 });
    const broke = await failure(new OpenAI({ baseURL: `${kiln.url}/v1`, apiKey: poor.key }).images.generate({ model: MODEL, prompt: 'x' }));
    expect(broke.status).toBe(402);
    expect(broke.headers?.get('x-should-retry')).toBe('false');
    expect(await batchCount(kiln.api, a.id)).toBe(batches);

    // The upstream rejects the route's request (not a refusal): Kiln's side, 502, but asking again cannot help.
    upstream.answerNext(json(400, { error: { type: 'invalid_request_error', code: 'invalid_value', message: 'Invalid size' } }));
    const calls = upstreamCalls();
    const rejected = await failure(openai.images.generate({ model: MODEL, prompt: 'rejected' }));
    expect(rejected.status).toBe(502);
    expect(rejected.headers?.get('x-should-retry')).toBe('false');
    expect(rejected.error).toMatchObject({ code: 'generation_failed', type: 'server_error', details: { retryable: false } });
    expect(upstreamCalls()).toBe(calls + 1);

    // The upstream stays down through every attempt: it may be up again, so the client may retry.
    const down = json(500, { error: { type: 'server_error', message: 'The server had an error' } });
    upstream.answerNext(down, down, down);
    const noRetry = new OpenAI({ baseURL: `${kiln.url}/v1`, apiKey: a.key, maxRetries: 0 });
    const unavailable = await failure(noRetry.images.generate({ model: MODEL, prompt: 'down' }));
    expect(unavailable.status).toBe(502);
    expect(unavailable.headers?.get('x-should-retry')).toBeNull();
    expect(unavailable.error).toMatchObject({ code: 'generation_failed', details: { retryable: true } });
  });

  it("the answer carries OpenAI's size, quality, output_format and background for what was made (no usage invented)", async () => {
    const made = await openai.images.generate({
      model: MODEL,
      prompt: 'a glass marble',
      size: '1024x1024',
      quality: 'high',
      background: 'transparent',
      output_format: 'webp',
      response_format: 'b64_json',
    });
    expect(made).toEqual({
      created: expect.any(Number),
      data: [{ b64_json: expect.any(String) }],
      size: '1024x1024',
      quality: 'high',
      output_format: 'webp',
      background: 'transparent',
    });
    const meta = await sharp(Buffer.from(made.data![0].b64_json!, 'base64')).metadata();
    expect([meta.width, meta.height, meta.format]).toEqual([1024, 1024, 'webp']);

    // quality auto: what it became upstream is not known, so it is left out; opaque by default.
    const auto = await openai.images.generate({ model: MODEL, prompt: 'a plain marble' });
    expect(auto).toEqual({
      created: expect.any(Number),
      data: [{ url: expect.any(String) }],
      size: '1024x1024',
      output_format: 'png',
      background: 'opaque',
    });
  });

  it('Idempotency-Key: a retry with the same key and body answers from the first batch (one batch, one upstream call, one charge)', async () => {
    const [batches, calls, before] = [await batchCount(kiln.api, a.id), upstreamCalls(), await balance()];
    const body = { model: MODEL, prompt: 'a kept promise', size: '1024x1024' as const };
    const headers = { 'Idempotency-Key': 'door-run-1' };
    const first = await openai.images.generate(body, { headers });
    const again = await openai.images.generate(body, { headers });
    expect(again).toEqual(first);
    expect([await batchCount(kiln.api, a.id), upstreamCalls()]).toEqual([batches + 1, calls + 1]);
    expect(before - (await balance())).toBeGreaterThan(0);
    const charged = before - (await balance());

    // The same key with another request is refused, and not retried: nothing made or charged.
    const reused = await failure(openai.images.generate({ ...body, prompt: 'another promise' }, { headers }));
    expect([reused.status, reused.error]).toEqual([422, expect.objectContaining({ code: 'idempotency_key_reused' })]);
    expect(reused.headers?.get('x-should-retry')).toBe('false');
    expect([await batchCount(kiln.api, a.id), upstreamCalls(), before - (await balance())]).toEqual([batches + 1, calls + 1, charged]);

    // Without a key every request is its own batch, as before.
    await openai.images.generate(body);
    expect(await batchCount(kiln.api, a.id)).toBe(batches + 2);
  });

  it('openaiAliases: an operator gives the model OpenAI names; the door (only) accepts them', async () => {
    const aliases = (key: string) => kiln.api.admin('patch', `/v1/admin/models/${key}`);
    // Before: OpenAI's name is no model here.
    const before = await failure(openai.images.generate({ model: 'gpt-image-1', prompt: 'x' }));
    expect(before.error).toMatchObject({ code: 'unknown_model', param: 'model' });

    expect(
      (
        await aliases(MODEL)
          .send({ openaiAliases: ['gpt-image-1', 'gpt-image-1.5'] })
          .expect(200)
      ).body.model,
    ).toMatchObject({
      openaiAliases: ['gpt-image-1', 'gpt-image-1.5'],
    });
    const listed = (await kiln.api.admin('get', '/v1/admin/models').expect(200)).body.models as { key: string; openaiAliases: string[] }[];
    expect(listed.find((m) => m.key === MODEL)!.openaiAliases).toEqual(['gpt-image-1', 'gpt-image-1.5']);
    expect(listed.find((m) => m.key === 'eta-image')!.openaiAliases).toEqual([]);

    const made = await openai.images.generate({ model: 'gpt-image-1', prompt: 'by its OpenAI name' });
    expect(made.data).toHaveLength(1);
    const [latest] = (await kiln.api.http.get('/v1/batches?limit=1').set('Authorization', `Bearer ${a.key}`).expect(200)).body.batches;
    expect(latest).toMatchObject({ model: MODEL, prompts: ['by its OpenAI name'] });
    // Kiln's own API takes keys only.
    const own = await kiln.api.http
      .post('/v1/batches')
      .set('Authorization', `Bearer ${a.key}`)
      .send({ model: 'gpt-image-1', prompts: ['x'] });
    expect(own.status).toBe(400);
    expect(own.body.error.code).toBe('unknown_model');

    // Validated, changing nothing: unique across models, never a model key, OpenAI's grammar, a few.
    const refused = async (key: string, body: Record<string, unknown>, reason: string, field = 'openaiAliases') => {
      const res = await aliases(key).send(body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field, reason } });
    };
    await refused('eta-image', { openaiAliases: ['gpt-image-1'] }, 'taken');
    await refused('eta-image', { openaiAliases: ['delta'] }, 'taken');
    await refused('eta-image', { openaiAliases: ['GPT Image 1'] }, 'bad_name');
    await refused('eta-image', { openaiAliases: ['dall-e-3', 'dall-e-3'] }, 'duplicate');
    await refused('eta-image', { openaiAliases: ['a1', 'a2', 'a3', 'a4', 'a5', 'a6'] }, 'too_many');
    await refused('eta-image', { openaiAliases: 'dall-e-3' }, 'isArray');
    const created = await kiln.api
      .admin('post', '/v1/admin/models')
      .send({ key: 'gpt-image-1', displayName: 'Shadow', creditCost: { '1K': 1 }, resolutionsByRatio: { '1:1': ['1K'] } });
    expect(created.status).toBe(400);
    expect(created.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'key', reason: 'taken' } });
    const after = (await kiln.api.admin('get', '/v1/admin/models').expect(200)).body.models as { key: string; openaiAliases: string[] }[];
    expect(after.find((m) => m.key === 'eta-image')!.openaiAliases).toEqual([]);
    expect(after.some((m) => m.key === 'gpt-image-1')).toBe(false);

    // [] clears: the name is unknown again.
    await aliases(MODEL).send({ openaiAliases: [] }).expect(200);
    const cleared = await failure(openai.images.generate({ model: 'gpt-image-1', prompt: 'x' }));
    expect(cleared.error).toMatchObject({ code: 'unknown_model' });
  });
});
