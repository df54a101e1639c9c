import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { BatchDetail, Kiln, KilnApiError } from '@app/sdk';
import { buildConfig } from '@app/config';
import { batchCount, routeModel, solidPng, TestAccount, waitFor } from '@app/testing';
import { DroppingProxy, LiveKiln, startLiveKiln } from './helpers/live-kiln';

jest.setTimeout(90_000);

const MODEL = 'beta-2-lite'; // 3 credits an image at 1K

/** Requests the SDK sent, by a fetch that records them. */
interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
  status?: number;
  preferenceApplied?: string | null;
}

function recordingFetch(): { fetch: typeof fetch; calls: Call[] } {
  const calls: Call[] = [];
  return {
    calls,
    fetch: async (input, init) => {
      const call: Call = {
        method: init?.method ?? 'GET',
        url: input instanceof Request ? input.url : String(input),
        headers: { ...(init?.headers as Record<string, string>) },
      };
      calls.push(call);
      const res = await fetch(input, init);
      call.status = res.status;
      call.preferenceApplied = res.headers.get('preference-applied');
      return res;
    },
  };
}

/** The SDK against a live Kiln over HTTP: the api on a port and a generator. */
describe('SDK against a live Kiln', () => {
  let kiln: LiveKiln;
  let restoreRoute: () => Promise<void>;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-sdk-'));

  beforeAll(async () => {
    const base = buildConfig(process.env);
    // Webhooks to a receiver on 127.0.0.1 (allowed for tests only), signed with a key of the run's own.
    kiln = await startLiveKiln('sdk', {
      webhooks: { ...base.webhooks, secretKey: randomBytes(32), allowPrivate: true, pollIntervalMs: 100 },
    });
    // Slow enough that a wait sees the batch move, fast enough for the suite.
    restoreRoute = await routeModel(kiln.api, MODEL, { type: 'simulated', latencyMs: { min: 150, max: 300 } });
  });
  afterAll(async () => {
    await restoreRoute?.();
    await kiln?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const clientFor = (a: TestAccount, extra: Partial<ConstructorParameters<typeof Kiln>[0]> = {}) =>
    new Kiln({ baseUrl: kiln.url, apiKey: a.key, ...extra });

  const charges = async (accountId: string): Promise<number> => {
    const [row] = await kiln.api.db.query(`SELECT count(*)::int AS n FROM ledger_entries WHERE account_id = $1 AND kind = 'batch_charge'`, [
      accountId,
    ]);
    return row.n;
  };

  it('reads models and me', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 100 });
    const sdk = clientFor(a);
    const catalog = await sdk.models();
    expect(catalog.models.map((m) => m.key)).toContain(MODEL);
    const me = await sdk.me();
    expect(me.user.id).toBe(a.id);
    expect(me.limits).toEqual(expect.objectContaining({ maxImagesPerBatch: 10, maxConcurrentBatches: 1 }));
  });

  it('create: a retry after a dropped answer creates and charges once (automatic idempotency key)', async () => {
    const a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    const proxy = new DroppingProxy({ host: '127.0.0.1', port: Number(new URL(kiln.url).port) });
    const baseUrl = await proxy.listen();
    try {
      const rec = recordingFetch();
      const sdk = clientFor(a, { baseUrl, fetch: rec.fetch });
      proxy.dropAnswerTo(/^POST \/v1\/batches /);
      const created = await sdk.batches.create({ model: MODEL, prompts: ['a fox', 'a hare'] });
      expect(proxy.dropped).toBe(1);
      const posts = rec.calls.filter((c) => c.method === 'POST');
      expect(posts).toHaveLength(2);
      expect(posts[0].headers['Idempotency-Key']).toMatch(/^[0-9a-f-]{36}$/);
      expect(posts[1].headers['Idempotency-Key']).toBe(posts[0].headers['Idempotency-Key']);
      expect(await batchCount(kiln.api, a.id)).toBe(1);
      expect(await charges(a.id)).toBe(1);
      const [row] = await kiln.api.db.query(`SELECT id FROM batches WHERE account_id = $1`, [a.id]);
      expect(created.id).toBe(row.id);
      expect(created.creditsCharged).toBe(6);
    } finally {
      await proxy.close();
    }
  });

  it('create: an explicit key makes a second call (another process) answer the same batch', async () => {
    const a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    const sdk = clientFor(a);
    const first = await sdk.batches.create({ model: MODEL, prompts: ['one'] }, { idempotencyKey: 'job-42' });
    const again = await clientFor(a).batches.create({ model: MODEL, prompts: ['one'] }, { idempotencyKey: 'job-42' });
    expect(again.id).toBe(first.id);
    expect(await charges(a.id)).toBe(1);
  });

  it('wait: progress callbacks as the batch moves, long polling with ETag and Prefer: wait', async () => {
    const a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    const rec = recordingFetch();
    const sdk = clientFor(a, { fetch: rec.fetch });
    const { id } = await sdk.batches.create({ model: MODEL, prompts: Array.from({ length: 8 }, (_, i) => `wait ${i}`) });
    const seen: BatchDetail[] = [];
    const done = await sdk.batches.wait(id, { onProgress: (d) => seen.push(d) });
    expect(done.batch.done).toBe(true);
    expect(done.batch.counts.succeeded).toBe(8);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen[seen.length - 1]).toEqual(done);
    const finished = seen.map((d) => d.batch.counts.succeeded + d.batch.counts.failed);
    expect(finished).toEqual([...finished].sort((x, y) => x - y));
    // Every poll asks the server to hold it; after the first, with the ETag it last saw.
    const polls = rec.calls.filter((c) => c.method === 'GET' && c.url.endsWith(`/v1/batches/${id}`));
    expect(polls.every((p) => /^wait=\d+$/.test(p.headers.Prefer))).toBe(true);
    expect(polls.slice(1).every((p) => typeof p.headers['If-None-Match'] === 'string')).toBe(true);
    // The server held them (Prefer honoured), so each answer is a change, not a timer tick.
    expect(polls.every((p) => p.preferenceApplied === p.headers.Prefer)).toBe(true);
    expect(polls.length).toBeLessThanOrEqual(seen.length + 2);
  });

  it('wait: timeoutMs and an abort signal end it', async () => {
    const a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    const sdk = clientFor(a);
    await routeModel(kiln.api, 'delta', { type: 'simulated', latencyMs: 4000 });
    const { id } = await sdk.batches.create({ model: 'delta', prompts: ['slow'] });
    await expect(sdk.batches.wait(id, { timeoutMs: 1500 })).rejects.toMatchObject({ code: 'wait_timeout' });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('stop')), 300);
    await expect(sdk.batches.wait(id, { signal: controller.signal })).rejects.toThrow('stop');
  });

  it('list: an async iterator across pages, newest first', async () => {
    const a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    const rec = recordingFetch();
    const sdk = clientFor(a, { fetch: rec.fetch });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await sdk.batches.create({ model: MODEL, prompts: [`page ${i}`] })).id);
    const listed: string[] = [];
    for await (const b of sdk.batches.list({ pageSize: 2 })) listed.push(b.id);
    expect(listed).toEqual([...ids].reverse());
    expect(rec.calls.filter((c) => c.url.includes('/v1/batches?'))).toHaveLength(3);
  });

  it('errors are KilnApiError with code, status, details and the request id', async () => {
    const poor = await kiln.api.account({ plan: 'starter', credits: 0 });
    const sdk = clientFor(poor);
    const refused = await sdk.batches.create({ model: MODEL, prompts: ['x'] }).catch((e) => e);
    expect(refused).toBeInstanceOf(KilnApiError);
    expect(refused).toMatchObject({ code: 'insufficient_credits', status: 402 });
    expect(refused.requestId).toMatch(/.+/);
    const invalid = await sdk.batches.create({ model: MODEL, prompts: [] }).catch((e) => e);
    expect(invalid).toMatchObject({ code: 'invalid_request', status: 400, details: expect.objectContaining({ field: 'prompts' }) });
    await expect(sdk.batches.get('00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({ code: 'not_found', status: 404 });
    await expect(new Kiln({ baseUrl: kiln.url, apiKey: 'kiln_live_nope' }).me()).rejects.toMatchObject({
      code: expect.stringMatching(/invalid_api_key|unauthorized/),
      status: 401,
    });
    // Nothing listens there: a connection error after the retries, typed too.
    const nowhere = new Kiln({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k', maxRetries: 1 });
    await expect(nowhere.me()).rejects.toMatchObject({ name: 'KilnConnectionError', code: 'connection_failed', status: 0 });
  });

  it('uploads, then download: every image under its result name, resumable', async () => {
    const a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    const sdk = clientFor(a);
    const refFile = path.join(tmp, 'ref.png');
    fs.writeFileSync(refFile, await solidPng(8, 8, { r: 200, g: 0, b: 0 }));
    const uploaded = await sdk.uploads.create([refFile, { name: 'b.png', data: await solidPng(8, 8, { r: 0, g: 0, b: 200 }) }]);
    expect(uploaded.files.map((f) => f.name)).toEqual(['ref.png', 'b.png']);
    expect(uploaded.files[0].url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/files\//);
    const { id } = await sdk.batches.create({ model: MODEL, prompts: ['d1', 'd2', 'd3'] });
    await sdk.batches.wait(id);
    const dir = path.join(tmp, 'download');
    const first = await sdk.batches.download(id, dir);
    expect(first.map((f) => f.skipped)).toEqual([false, false, false]);
    const names = fs.readdirSync(dir).sort();
    expect(names).toEqual(first.map((f) => path.basename(f.path)).sort());
    expect(names.every((n) => n.startsWith(`kiln-${id.slice(0, 8)}-`) && n.endsWith('.png'))).toBe(true);
    const bytes = fs.readFileSync(path.join(dir, names[0]));
    expect(bytes.subarray(1, 4).toString()).toBe('PNG');
    // An interrupted run leaves a .part file and a missing image; the next run fills in only that.
    fs.rmSync(path.join(dir, names[1]));
    fs.writeFileSync(path.join(dir, `${names[1]}.part`), 'half');
    const again = await sdk.batches.download(id, dir);
    expect(again.filter((f) => !f.skipped).map((f) => path.basename(f.path))).toEqual([names[1]]);
    expect(fs.readdirSync(dir).sort()).toEqual(names);
  });

  it('estimate prices a body without charging; archive streams a zip', async () => {
    const a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    const sdk = clientFor(a);
    const estimate = await sdk.batches.estimate({ model: MODEL, prompts: ['e1', 'e2'], countPerCombo: 2 });
    expect(estimate).toMatchObject({ total: 4, creditCost: 3, creditsRequired: 12, balance: 1000, wouldCreate: true, refusal: null });
    expect(await charges(a.id)).toBe(0);

    const { id } = await sdk.batches.create({ model: MODEL, prompts: ['A Red Fox!'] });
    await sdk.batches.wait(id);
    const chunks: Buffer[] = [];
    for await (const chunk of await sdk.batches.archive(id)) chunks.push(chunk as Buffer);
    const zip = Buffer.concat(chunks);
    expect(zip.subarray(0, 2).toString()).toBe('PK');
    expect(zip.toString('latin1')).toContain('images/0001-a-red-fox.png');
  });

  it("tier: economy priced and created at the model's economy price with its window; tier_not_available as a KilnApiError; the catalog and me show both", async () => {
    // gamma-5-pro: 1K 6, 2K 12 at standard. Economy (1K 3, within 24 h) needs a route that runs
    // upstream batches: the simulated type's local batch API. No collector runs here: the
    // economy tasks wait pending, which is all this needs.
    const eco = await kiln.api
      .admin('patch', '/v1/admin/models/gamma-5-pro')
      .send({ provider: { type: 'simulated', batch: { enabled: true } }, economyCreditCost: { '1K': 3 }, economyWindowHours: 24 });
    expect(eco.status).toBe(200);
    const a = await kiln.api.account({ plan: 'studio', credits: 100 });
    const sdk = clientFor(a);
    const model = (await sdk.models()).models.find((m) => m.key === 'gamma-5-pro')!;
    expect(model).toMatchObject({ creditCost: { '1K': 6, '2K': 12 }, economyCreditCost: { '1K': 3 }, economyWindowHours: 24 });
    expect((await sdk.models()).models.find((m) => m.key === MODEL)).toMatchObject({ economyCreditCost: null, economyWindowHours: null });

    const body = { model: 'gamma-5-pro', prompts: ['e1', 'e2'], countPerCombo: 2, tier: 'economy' as const };
    expect(await sdk.batches.estimate(body)).toMatchObject({
      tier: 'economy',
      total: 4,
      creditCost: 3,
      creditsRequired: 12,
      wouldCreate: true,
    });
    expect(await sdk.batches.estimate({ ...body, tier: 'standard' })).toMatchObject({
      tier: 'standard',
      creditCost: 6,
      creditsRequired: 24,
    });

    const created = await sdk.batches.create(body);
    expect(created).toMatchObject({ total: 4, creditsCharged: 12 });
    const { batch } = await sdk.batches.get(created.id);
    expect(batch).toMatchObject({ tier: 'economy', done: false });
    expect(batch.expiresAt).toBe(batch.createdAt + 24 * 3_600_000);
    expect(await kiln.api.balance(a.id)).toBe(88);
    const me = await sdk.me();
    expect(me.limits).toMatchObject({ maxConcurrentEconomyBatches: 10, activeEconomyBatches: 1, activeBatches: 0 });

    // Economy where the model has none: the SDK's error, nothing charged.
    const refused = await sdk.batches.create({ model: MODEL, prompts: ['x'], tier: 'economy' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(KilnApiError);
    expect(refused).toMatchObject({ code: 'tier_not_available', status: 400, details: { model: MODEL, tier: 'economy' } });
    expect(await kiln.api.balance(a.id)).toBe(88);
  });

  it('cancel stops what has not started and answers the batch', async () => {
    const a = await kiln.api.account({ plan: 'scale', credits: 1000 });
    const sdk = clientFor(a);
    await routeModel(kiln.api, 'delta', { type: 'simulated', latencyMs: 4000, maxConcurrency: 1 });
    const slow = await sdk.batches.create({ model: 'delta', prompts: Array.from({ length: 6 }, (_, i) => `c${i}`) });
    const cancelled = await sdk.batches.cancel(slow.id);
    expect(cancelled.id).toBe(slow.id);
    expect((cancelled.counts as { cancelled?: number }).cancelled).toBeGreaterThanOrEqual(4);
    const done = await sdk.batches.wait(slow.id, { timeoutMs: 30_000 });
    expect(done.batch.status).toBe('cancelled');
  });

  it('webhooks: create, list, test ping verified with Kiln.verifyWebhook, deliveries, rotate, delete', async () => {
    const a = await kiln.api.account({ plan: 'scale', credits: 10 });
    const sdk = clientFor(a);
    const received: { body: string; headers: http.IncomingHttpHeaders }[] = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req
        .on('data', (d) => (body += d))
        .on('end', () => {
          received.push({ body, headers: req.headers });
          res.writeHead(204).end();
        });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      const { endpoint, secret } = await sdk.webhooks.create({ url, events: ['batch.completed'], description: 'sdk test' });
      expect(secret).toMatch(/^whsec_/);
      expect((await sdk.webhooks.list()).map((e) => e.id)).toEqual([endpoint.id]);
      const ping = await sdk.webhooks.test(endpoint.id);
      expect(ping.type).toBe('ping');
      await waitFor('the ping to arrive', () => received.length > 0, 20_000);
      const event = Kiln.verifyWebhook(received[0].body, received[0].headers, secret);
      expect(event).toMatchObject({ id: ping.id, type: 'ping' });
      expect(() =>
        Kiln.verifyWebhook(received[0].body, received[0].headers as Record<string, string>, `whsec_${randomBytes(32).toString('base64')}`),
      ).toThrow();
      const delivered = await waitFor(
        'the delivery to be recorded',
        async () => {
          const all = [];
          for await (const d of sdk.webhooks.deliveries(endpoint.id, { pageSize: 1 })) all.push(d);
          return all.length === 1 && all[0].status === 'delivered' ? all : null;
        },
        20_000,
      );
      expect(delivered[0].id).toBe(ping.id);
      const rotated = await sdk.webhooks.rotateSecret(endpoint.id);
      expect(rotated.secret).not.toBe(secret);
      await sdk.webhooks.delete(endpoint.id);
      expect(await sdk.webhooks.list()).toEqual([]);
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });
});
