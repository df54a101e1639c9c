import {
  OpenAiBatchApi,
  OpenAiBatchConfig,
  openAiUpstreamSize,
  pixelSize,
  UpstreamBatchLine,
  UpstreamBatchResult,
  UpstreamBatchStatus,
} from '@app/providers';
import { abandonedCreate, collect, readWhileHeld, rejection, submit } from '../upstream-batch.spec-helpers';
import { OPENAI_BATCH_FAKE_MARKERS as M, OpenAiBatchFakeUpstream } from './openai-batch.fake';

const KEY = 'sk-batch-secret-0123456789';

function api(fake: OpenAiBatchFakeUpstream, overrides: Partial<OpenAiBatchConfig> = {}): OpenAiBatchApi {
  const route = { type: 'openai' as const, baseUrl: fake.baseUrl, model: 'gpt-image-1' };
  return new OpenAiBatchApi({
    baseUrl: fake.baseUrl,
    apiKey: KEY,
    model: 'gpt-image-1',
    upstreamSize: (asked) => openAiUpstreamSize(route, asked),
    timeoutMs: 5000,
    allowPrivate: true,
    maxImageBytes: 8 * 1024 * 1024,
    pollIntervalMs: 10,
    ...overrides,
  });
}

function line(key: string, prompt = `prompt ${key}`): UpstreamBatchLine {
  return {
    key,
    request: {
      prompt,
      seed: 1,
      ...pixelSize('1:1', '1K'),
      resolution: '1K',
      aspectRatio: '1:1',
      quality: 'high',
      background: null,
      references: [],
    },
  };
}

type Ended = Extract<UpstreamBatchStatus, { state: 'ended' }>;

describe('OpenAiBatchApi against the fake Batch API', () => {
  let fake: OpenAiBatchFakeUpstream;
  beforeEach(async () => {
    fake = new OpenAiBatchFakeUpstream({ completeAfterMs: null });
    await fake.start();
  });
  afterEach(() => fake.stop());

  it('encodes a generations line with the sync request mapping', () => {
    const encoded = JSON.parse(api(fake).encodeLine(line('task-1', 'A fox')));
    expect(encoded).toEqual({
      custom_id: 'task-1',
      method: 'POST',
      url: '/v1/images/generations',
      body: { model: 'gpt-image-1', prompt: 'A fox', n: 1, size: '1024x1024', quality: 'high' },
    });
  });

  it('refuses a task with reference images (the Batch API takes JSON lines, edits take multipart files)', () => {
    const withRef = line('task-r');
    withRef.request.references = [{ data: Buffer.from('x'), contentType: 'image/png' }];
    expect(OpenAiBatchApi.unbatchable(withRef)).toMatch(/reference images/);
    expect(() => api(fake).encodeLine(withRef)).toThrow(expect.objectContaining({ kind: 'bad_request' }));
  });

  it('full path: upload, create tagged with the group, poll to the end, every line out of order with a refusal and a failure', async () => {
    const client = api(fake);
    const lines = [line('a'), line('b', `x ${M.refuse}`), line('c'), line('d', `y ${M.fail}`), line('e')];
    const ref = await submit(client, lines, 'group-1');

    const upload = fake.requests.find((r) => r.path === '/v1/files')!;
    expect(upload.headers.authorization).toBe(`Bearer ${KEY}`);
    const created = fake.batches.get(ref.batchId)!;
    expect(created).toMatchObject({ endpoint: '/v1/images/generations', completion_window: '24h', metadata: { kiln_group: 'group-1' } });
    expect(ref.state.inputFileId).toBe(created.input_file_id);

    expect(await client.poll(ref)).toMatchObject({ state: 'waiting', upstreamStatus: 'in_progress' });
    await fake.finish(ref.batchId, 'completed');
    const ended = (await client.poll(ref)) as Ended;
    expect(ended).toMatchObject({ state: 'ended', outcome: 'completed', upstreamStatus: 'completed' });
    expect(ended.found.outputFileId).toBeDefined();
    expect(ended.found.errorFileId).toBeDefined();

    const results = await collect(client.results(ref, ended));
    const okKeys = results.filter((r) => r.ok).map((r) => r.key);
    expect(okKeys.sort()).toEqual(['a', 'c', 'e']);
    expect(results.map((r) => r.key)).not.toEqual(['a', 'c', 'e', 'b', 'd']); // as written: shuffled
    const byKey = new Map(results.map((r) => [r.key, r]));
    const a = byKey.get('a') as Extract<UpstreamBatchResult, { ok: true }>;
    // Size read from the real bytes (the fake writes 1/8 of the asked size).
    expect(a.image).toMatchObject({ contentType: 'image/png', width: 128, height: 128 });
    // The line's usage comes with the image: it prices it, as on a render.
    expect(a.image.usage).toEqual({ inputTextTokens: 20, inputImageTokens: 0, outputImageTokens: 1056, outputTextTokens: 0 });
    const refused = byKey.get('b') as Extract<UpstreamBatchResult, { ok: false }>;
    expect(refused.error).toMatchObject({ kind: 'content_refused', upstreamCode: 'moderation_blocked', status: 400 });
    const failed = byKey.get('d') as Extract<UpstreamBatchResult, { ok: false }>;
    expect(failed.error).toMatchObject({ kind: 'upstream_error', status: 500 });
    expect(results).toHaveLength(5);
    expect([...fake.submissions.values()]).toEqual([1, 1, 1, 1, 1]);
    // The key never leaves in a message.
    for (const r of results) if (!r.ok) expect(r.error.message).not.toContain(KEY);
  });

  it('an expired batch delivers what it finished; the lines it never ran are left out for Kiln to refund', async () => {
    const client = api(fake);
    const ref = await submit(
      client,
      [line('done-1'), line('late-1', M.unfinished), line('done-2'), line('late-2', M.unfinished)],
      'group-exp',
    );
    await fake.finish(ref.batchId, 'expired');
    const ended = (await client.poll(ref)) as Ended;
    expect(ended).toMatchObject({ state: 'ended', outcome: 'expired' });
    const results = await collect(client.results(ref, ended));
    expect(results.map((r) => r.key).sort()).toEqual(['done-1', 'done-2']);
    expect(results.every((r) => r.ok)).toBe(true);
  });

  it('cancel: cancelling is waiting, then cancelled with the partial results', async () => {
    const client = api(fake);
    const ref = await submit(client, [line('kept'), line('stopped', M.unfinished)], 'group-cancel');
    await client.cancel(ref);
    expect(fake.requests.at(-1)).toMatchObject({ method: 'POST', path: `/v1/batches/${ref.batchId}/cancel` });
    expect(await client.poll(ref)).toMatchObject({ state: 'waiting', upstreamStatus: 'cancelling' });
    const ended = (await client.poll(ref)) as Ended;
    expect(ended).toMatchObject({ state: 'ended', outcome: 'cancelled' });
    const results = await collect(client.results(ref, ended));
    expect(results.map((r) => r.key)).toEqual(['kept']);
    // Cancelling a batch already over is not an error: nothing is left to stop.
    await expect(client.cancel(ref)).resolves.toBeUndefined();
  });

  it('a failed batch is ended with outcome failed', async () => {
    const client = api(fake);
    const ref = await submit(client, [line('f1', M.unfinished)], 'group-failed');
    await fake.finish(ref.batchId, 'failed');
    const ended = (await client.poll(ref)) as Ended;
    expect(ended).toMatchObject({ state: 'ended', outcome: 'failed', found: {} });
    expect(await collect(client.results(ref, ended))).toEqual([]);
  });

  it('findBatch after a crash between create and record: found by its metadata across pages, null for a group never created', async () => {
    const client = api(fake);
    const { inputId, pending } = await abandonedCreate(client, fake, line('lost-1'), 'group-lost');
    await expect(pending).rejects.toThrow('generator killed');
    // 150 newer batches of other groups: the list is read page by page (100 a page).
    for (let i = 0; i < 150; i++) await submit(client, [line(`other-${i}`)], `group-other-${i}`);

    const found = await client.findBatch('group-lost');
    expect(found?.batchId).toBe([...fake.batches.values()][0].id);
    expect(found?.state.inputFileId).toBe(inputId);
    expect(fake.requests.filter((r) => r.path.startsWith('/v1/batches?')).map((r) => r.path)).toEqual([
      '/v1/batches?limit=100',
      expect.stringMatching(/^\/v1\/batches\?limit=100&after=batch_/),
    ]);
    expect(await client.findBatch('group-never')).toBeNull();
    expect(fake.submissions.get('lost-1')).toBe(1);
  });

  it('findBatch stops at batches older than its window', async () => {
    const client = api(fake, { findWindowMs: 60_000, now: () => Date.now() + 10 * 60_000 });
    for (let i = 0; i < 120; i++) await submit(client, [line(`old-${i}`)], `group-old-${i}`);
    fake.requests.length = 0;
    expect(await client.findBatch('group-old-0')).toBeNull(); // on the second page, but past the window
    expect(fake.requests).toHaveLength(1);
  });

  it('a hung call times out; a hung poll is answered as waiting', async () => {
    const client = api(fake, { timeoutMs: 300 });
    fake.hangAt = 'upload';
    expect(await rejection(client.uploadInput([client.encodeLine(line('t'))], 'group-t'))).toMatchObject({ kind: 'timeout' });
    const ref = await submit(client, [line('t')], 'group-t');
    fake.hangAt = 'poll';
    expect(await client.poll(ref)).toMatchObject({ state: 'waiting', upstreamStatus: 'poll failed: timeout' });
    fake.hangAt = 'create';
    expect(await rejection(client.createBatch(ref.state.inputFileId, 'group-t2'))).toMatchObject({ kind: 'timeout' });
  });

  it('a result file that stalls mid-way fails the stream with a timeout', async () => {
    const client = api(fake, { timeoutMs: 300 });
    const ref = await submit(client, [line('s1'), line('s2'), line('s3')], 'group-stall');
    await fake.finish(ref.batchId, 'completed');
    const ended = (await client.poll(ref)) as Ended;
    fake.holdOutputAfter(1);
    const seen: string[] = [];
    const err = await rejection(
      (async () => {
        for await (const r of client.results(ref, ended)) seen.push(r.key);
      })(),
    );
    expect(err.kind).toBe('timeout');
    expect(seen).toHaveLength(1);
  });

  it('poll: 429 and 5xx are passing trouble (waiting, with Retry-After); 401 is thrown', async () => {
    const client = api(fake);
    const ref = await submit(client, [line('p')], 'group-p');
    fake.answerNext({
      status: 429,
      headers: { 'retry-after': '7' },
      body: JSON.stringify({ error: { message: 'slow down', code: 'rate_limit_exceeded' } }),
    });
    expect(await client.poll(ref)).toEqual({ state: 'waiting', upstreamStatus: 'poll failed: rate_limited', retryAfterMs: 7000 });
    fake.answerNext({ status: 503, body: '{}' });
    expect(await client.poll(ref)).toMatchObject({ state: 'waiting' });
    fake.answerNext({ status: 401, body: JSON.stringify({ error: { message: `Incorrect API key provided: ${KEY}` } }) });
    const err = await rejection(client.poll(ref));
    expect(err).toMatchObject({ kind: 'bad_request', status: 401 });
    expect(err.message).not.toContain(KEY);
  });

  it('a line too long for any image Kiln takes fails only its own task; lines around it are read', async () => {
    const client = api(fake, { maxImageBytes: 1000 });
    const ref = await submit(client, [line('small-1'), line('huge'), line('small-2')], 'group-huge');
    await fake.finish(ref.batchId, 'completed');
    const ended = (await client.poll(ref)) as Ended;
    const png = (await collect(client.results(ref, ended))).find((r) => r.ok) as Extract<UpstreamBatchResult, { ok: true }>;
    const ok = (key: string) =>
      JSON.stringify({
        id: 'r',
        custom_id: key,
        response: { status_code: 200, body: { data: [{ b64_json: png.image.data.toString('base64') }] } },
        error: null,
      });
    const huge = JSON.stringify({
      id: 'r',
      custom_id: 'huge',
      response: { status_code: 200, body: { data: [{ b64_json: 'A'.repeat(3 * 1024 * 1024) }] } },
      error: null,
    });
    fake.answerNext({
      status: 200,
      headers: { 'content-type': 'application/octet-stream' },
      body: `${ok('small-1')}\n${huge}\n${ok('small-2')}\n`,
    });
    const results = await collect(client.results(ref, { ...ended, found: { outputFileId: ended.found.outputFileId } }));
    expect(results.map((r) => [r.key, r.ok])).toEqual([
      ['small-1', true],
      ['huge', false],
      ['small-2', true],
    ]);
    expect((results[1] as Extract<UpstreamBatchResult, { ok: false }>).error).toMatchObject({ kind: 'invalid_response' });
  });

  it('streams a large output file line by line: results arrive while the fake is still held mid-file', async () => {
    const client = api(fake, { maxImageBytes: 1024 * 1024 });
    const lines = Array.from({ length: 2000 }, (_, i) => line(`big-${i}`));
    const ref = await submit(client, lines, 'group-big');
    await fake.finish(ref.batchId, 'completed');
    const ended = (await client.poll(ref)) as Ended;
    const read = await readWhileHeld(fake, client.results(ref, ended), 1000);
    expect(read.failed).toEqual([]);
    // Half the file is out and the fake is held: the client has already answered lines,
    // so it did not wait for the whole file. Then the rest is let through.
    expect(read.writtenAtHeld).toBe(1000);
    expect(read.writtenAtFirst).toBeLessThan(2000);
    expect(read.keys.size).toBe(2000);
  });
});
