import { GeminiBatchApi, GeminiBatchConfig, pixelSize, UpstreamBatchLine, UpstreamBatchResult, UpstreamBatchStatus } from '@app/providers';
import { abandonedCreate, collect, readWhileHeld, rejection, submit } from '../upstream-batch.spec-helpers';
import { GEMINI_BATCH_FAKE_MARKERS as M, GeminiBatchFakeUpstream } from './gemini-batch.fake';

const KEY = 'gemini-batch-secret-0123456789';
type Ended = Extract<UpstreamBatchStatus, { state: 'ended' }>;

function api(fake: GeminiBatchFakeUpstream, overrides: Partial<GeminiBatchConfig> = {}): GeminiBatchApi {
  return new GeminiBatchApi({
    baseUrl: fake.baseUrl,
    apiKey: KEY,
    model: 'gemini-3.1-flash-image',
    timeoutMs: 5000,
    allowPrivate: true,
    maxImageBytes: 8 * 1024 * 1024,
    pollIntervalMs: 10,
    ...overrides,
  });
}

function line(key: string, prompt = `prompt ${key}`, references: UpstreamBatchLine['request']['references'] = []): UpstreamBatchLine {
  return {
    key,
    request: {
      prompt,
      seed: 3,
      ...pixelSize('16:9', '1K'),
      resolution: '1K',
      aspectRatio: '16:9',
      quality: null,
      background: null,
      references,
    },
  };
}

describe('GeminiBatchApi against the fake batch API', () => {
  let fake: GeminiBatchFakeUpstream;
  beforeEach(async () => {
    fake = new GeminiBatchFakeUpstream({ completeAfterMs: null });
    await fake.start();
  });
  afterEach(() => fake.stop());

  it('encodes a {key, request} line with the sync request body (references inline)', () => {
    const encoded = JSON.parse(api(fake).encodeLine(line('k1', 'A fox', [{ data: Buffer.from('png'), contentType: 'image/png' }])));
    expect(encoded).toEqual({
      key: 'k1',
      request: {
        contents: [
          {
            role: 'user',
            parts: [{ text: 'A fox' }, { inlineData: { mimeType: 'image/png', data: Buffer.from('png').toString('base64') } }],
          },
        ],
        generationConfig: { responseModalities: ['IMAGE'], seed: 3, imageConfig: { aspectRatio: '16:9', imageSize: '1K' } },
      },
    });
  });

  it('full path: resumable upload on its own origin, create named by the group, poll, results out of order with a refusal and a failure', async () => {
    const client = api(fake);
    const ref = await submit(client, [line('a'), line('b', `x ${M.refuse}`), line('c'), line('d', `y ${M.fail}`)], 'group-g1');
    const [start, bytes, create] = fake.requests;
    expect(start).toMatchObject({ method: 'POST', path: '/upload/v1beta/files' });
    expect(start.headers).toMatchObject({ 'x-goog-api-key': KEY, 'x-goog-upload-protocol': 'resumable', 'x-goog-upload-command': 'start' });
    expect(bytes.path).toMatch(/^\/upload\/v1beta\/files\?upload_id=/);
    expect(bytes.headers).toMatchObject({
      'x-goog-upload-command': 'upload, finalize',
      'x-goog-upload-offset': '0',
      host: new URL(fake.baseUrl).host,
    });
    expect(create).toMatchObject({ method: 'POST', path: '/v1beta/models/gemini-3.1-flash-image:batchGenerateContent' });
    expect(JSON.parse(create.body.toString())).toEqual({
      batch: { inputConfig: { fileName: expect.stringMatching(/^files\//) }, displayName: 'group-g1' },
    });
    expect(ref.batchId).toMatch(/^batches\//);

    expect(await client.poll(ref)).toMatchObject({ state: 'waiting', upstreamStatus: 'BATCH_STATE_RUNNING' });
    await fake.finish(ref.batchId, 'BATCH_STATE_SUCCEEDED');
    const ended = (await client.poll(ref)) as Ended;
    expect(ended).toMatchObject({ state: 'ended', outcome: 'completed', found: { responsesFile: expect.stringMatching(/^files\//) } });
    const results = await collect(client.results(ref, ended));
    expect(results.map((r) => r.key)).not.toEqual(['a', 'b', 'c', 'd']);
    const byKey = new Map(results.map((r) => [r.key, r]));
    expect(byKey.get('a')).toMatchObject({ ok: true, image: { contentType: 'image/png', width: 168, height: 96 } });
    expect(byKey.get('c')).toMatchObject({ ok: true });
    expect((byKey.get('b') as Extract<UpstreamBatchResult, { ok: false }>).error).toMatchObject({
      kind: 'content_refused',
      upstreamCode: 'PROHIBITED_CONTENT',
    });
    expect((byKey.get('d') as Extract<UpstreamBatchResult, { ok: false }>).error).toMatchObject({
      kind: 'upstream_error',
      status: 500,
      upstreamCode: 'INTERNAL',
    });
    expect(results).toHaveLength(4);
    expect([...fake.submissions.values()]).toEqual([1, 1, 1, 1]);
  });

  it('uploads a large input in 8 MB chunks, the last one finalizing', async () => {
    const client = api(fake);
    const big = 'x'.repeat(6 * 1024 * 1024);
    const { inputId } = await client.uploadInput([client.encodeLine(line('l1', big)), client.encodeLine(line('l2', big))], 'group-chunks');
    const uploads = fake.requests.filter((r) => r.path.includes('upload_id='));
    expect(uploads.map((r) => [r.headers['x-goog-upload-command'], r.headers['x-goog-upload-offset']])).toEqual([
      ['upload', '0'],
      ['upload, finalize', String(8 * 1024 * 1024)],
    ]);
    expect(fake.files.get(inputId)!.toString().split('\n').filter(Boolean)).toHaveLength(2);
    // 12 MB through a local server and back: a second on a quiet machine, past jest's 5 s
    // default on a loaded one (the full suite beside other work).
  }, 30_000);

  it('an expired batch delivers what it finished; unrun lines are left for Kiln to refund', async () => {
    const client = api(fake);
    const ref = await submit(client, [line('done'), line('late', M.unfinished)], 'group-exp');
    await fake.finish(ref.batchId, 'BATCH_STATE_EXPIRED');
    const ended = (await client.poll(ref)) as Ended;
    expect(ended).toMatchObject({ outcome: 'expired' });
    expect((await collect(client.results(ref, ended))).map((r) => r.key)).toEqual(['done']);
  });

  it('cancel: POST :cancel, then ended cancelled with what was done; a second cancel is a no-op', async () => {
    const client = api(fake);
    const ref = await submit(client, [line('kept'), line('stopped', M.unfinished)], 'group-cancel');
    await client.cancel(ref);
    expect(fake.requests.at(-1)).toMatchObject({ method: 'POST', path: `/v1beta/${ref.batchId}:cancel` });
    const ended = (await client.poll(ref)) as Ended;
    expect(ended).toMatchObject({ outcome: 'cancelled' });
    expect((await collect(client.results(ref, ended))).map((r) => r.key)).toEqual(['kept']);
    await expect(client.cancel(ref)).resolves.toBeUndefined();
  });

  it('a failed batch without a responses file delivers nothing', async () => {
    const client = api(fake);
    const ref = await submit(client, [line('f')], 'group-failed');
    await fake.finish(ref.batchId, 'BATCH_STATE_FAILED');
    const ended = (await client.poll(ref)) as Ended;
    expect(ended).toMatchObject({ outcome: 'failed', found: {} });
    expect(await collect(client.results(ref, ended))).toEqual([]);
  });

  it('findBatch after a crash between create and record: found by displayName across pages', async () => {
    const client = api(fake);
    const { pending } = await abandonedCreate(client, fake, line('lost'), 'group-lost');
    await expect(pending).rejects.toThrow('generator killed');
    for (let i = 0; i < 120; i++) await submit(client, [line(`o-${i}`)], `group-other-${i}`);
    const found = await client.findBatch('group-lost');
    expect(found?.batchId).toBe([...fake.batches.keys()][0]);
    expect(fake.requests.filter((r) => r.path.startsWith('/v1beta/batches?')).map((r) => r.path)).toEqual([
      '/v1beta/batches?pageSize=100',
      '/v1beta/batches?pageSize=100&pageToken=100',
    ]);
    expect(await client.findBatch('group-never')).toBeNull();
    expect(fake.submissions.get('lost')).toBe(1);
  });

  it('findBatch stops at batches older than its window', async () => {
    const client = api(fake, { findWindowMs: 60_000, now: () => Date.now() + 10 * 60_000 });
    for (let i = 0; i < 110; i++) await submit(client, [line(`old-${i}`)], `group-old-${i}`);
    fake.requests.length = 0;
    expect(await client.findBatch('group-old-0')).toBeNull();
    expect(fake.requests).toHaveLength(1);
  });

  it('timeouts: a hung upload start or create rejects with timeout; a hung poll is waiting', async () => {
    const client = api(fake, { timeoutMs: 300 });
    fake.hangAt = 'upload-start';
    expect(await rejection(client.uploadInput([client.encodeLine(line('t'))], 'g-t'))).toMatchObject({ kind: 'timeout' });
    const { inputId } = await client.uploadInput([client.encodeLine(line('t'))], 'g-t');
    fake.hangAt = 'create';
    expect(await rejection(client.createBatch(inputId, 'g-t'))).toMatchObject({ kind: 'timeout' });
    const ref = await client.createBatch(inputId, 'g-t2');
    fake.hangAt = 'poll';
    expect(await client.poll(ref)).toMatchObject({ state: 'waiting', upstreamStatus: 'poll failed: timeout' });
  });

  it('poll: 429 with a RetryInfo delay is waiting; 403 is thrown without the key', async () => {
    const client = api(fake);
    const ref = await submit(client, [line('p')], 'g-p');
    fake.answerNext({
      status: 429,
      body: JSON.stringify({ error: { code: 429, status: 'RESOURCE_EXHAUSTED', message: 'quota', details: [{ retryDelay: '12s' }] } }),
    });
    expect(await client.poll(ref)).toEqual({ state: 'waiting', upstreamStatus: 'poll failed: rate_limited', retryAfterMs: 12_000 });
    fake.answerNext({
      status: 403,
      body: JSON.stringify({ error: { code: 403, status: 'PERMISSION_DENIED', message: `bad key ${KEY}` } }),
    });
    const err = await rejection(client.poll(ref));
    expect(err).toMatchObject({ kind: 'bad_request', status: 403 });
    expect(err.message).not.toContain(KEY);
  });

  it('streams a large responses file: results arrive while the fake is held mid-file', async () => {
    const client = api(fake, { maxImageBytes: 1024 * 1024 });
    const ref = await submit(
      client,
      Array.from({ length: 2000 }, (_, i) => line(`big-${i}`)),
      'g-big',
    );
    await fake.finish(ref.batchId, 'BATCH_STATE_SUCCEEDED');
    const ended = (await client.poll(ref)) as Ended;
    const read = await readWhileHeld(fake, client.results(ref, ended), 1000);
    expect(read.failed).toEqual([]);
    expect(read.writtenAtHeld).toBe(1000); // the fake is held: the client did not wait for the whole file
    expect(read.keys.size).toBe(2000);
  });
});
