import { TestAccount, TestApp, batchCount, insertUpload, postBatch } from '@app/testing';
import { bootBatchesApp } from './helpers/apps';

/**
 * Bodies built to cost the api more than they are worth: a batch that would expand into
 * millions of tasks, text PostgreSQL cannot store, integers its columns cannot hold, and
 * JSON nested 100,000 deep. Each is refused with 4xx, cheaply, and changes nothing.
 */
describe('hostile input', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootBatchesApp();
  });
  afterAll(() => t.close());

  /** Balance, ledger and batch count of an account, to show a refusal changed nothing. */
  async function snapshot(a: TestAccount) {
    return { balance: await t.balance(a.id), ledger: await t.ledgerSum(a.id), batches: await batchCount(t, a.id) };
  }

  describe('fan-out bombs are counted, not expanded', () => {
    const prompts = Array.from({ length: 1000 }, (_, i) => `prompt ${i}`);

    /** The request's wall time and the heap it leaves behind; both must stay small. */
    async function measure(a: TestAccount, body: object) {
      const heapBefore = process.memoryUsage().heapUsed;
      const started = performance.now();
      const res = await postBatch(t, a, body);
      const ms = performance.now() - started;
      const heapGrowth = process.memoryUsage().heapUsed - heapBefore;
      return { res, ms, heapGrowth };
    }

    it('one upload repeated 5,000 times (1000 prompts x 20 x each) -> 400 invalid_request refImages[1] duplicate', async () => {
      const a = await t.account({ credits: 0 });
      const up = await insertUpload(t, a.id);
      const before = await snapshot(a);
      for (const refMode of ['each', 'combined']) {
        const { res, ms, heapGrowth } = await measure(a, {
          prompts,
          model: 'eta-image',
          countPerCombo: 20,
          refMode,
          refImages: Array(5000).fill(up.url),
        });
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'refImages[1]', reason: 'duplicate' } });
        // Expanded, this request was 100,000,000 tasks: minutes, then out of memory.
        expect(ms).toBeLessThan(1000);
        expect(heapGrowth).toBeLessThan(48 * 1024 * 1024);
      }
      expect(await snapshot(a)).toEqual(before);
    });

    it('5,000 distinct references on a model without a declared cap -> 400 too_many_ref_images { max: 16, given }', async () => {
      const a = await t.account({ credits: 0 });
      const before = await snapshot(a);
      const refImages = Array.from({ length: 5000 }, (_, i) => `http://kiln.test/files/uploads/${i}/a.png`);
      const { res, ms, heapGrowth } = await measure(a, { prompts, model: 'eta-image', countPerCombo: 20, refMode: 'each', refImages });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'too_many_ref_images', details: { max: 16, given: 5000 } });
      expect(ms).toBeLessThan(1000);
      expect(heapGrowth).toBeLessThan(48 * 1024 * 1024);
      expect(await snapshot(a)).toEqual(before);
    });

    it('16 real references, 1000 prompts x 20 each (320,000 images) -> 403 batch_limit_exceeded before any task is made', async () => {
      const a = await t.account({ credits: 0 });
      const refImages: string[] = [];
      for (let i = 0; i < 16; i++) refImages.push((await insertUpload(t, a.id)).url);
      const before = await snapshot(a);
      const { res, ms, heapGrowth } = await measure(a, { prompts, model: 'eta-image', countPerCombo: 20, refMode: 'each', refImages });
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'batch_limit_exceeded', details: { total: 320_000, max: 50 } });
      expect(ms).toBeLessThan(1000);
      expect(heapGrowth).toBeLessThan(48 * 1024 * 1024);
      expect(await snapshot(a)).toEqual(before);
    });

    it('the catalog publishes the ceiling; eta-image keeps maxRefImages null; an operator cannot raise a cap past it', async () => {
      const a = await t.account();
      const res = await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`).expect(200);
      expect(res.body.limits.maxRefImages).toBe(16);
      expect(res.body.models.find((m: { key: string }) => m.key === 'eta-image').maxRefImages).toBeNull();
      const tooMany = await t.admin('patch', '/v1/admin/models/delta').send({ maxRefImages: 17 });
      expect(tooMany.status).toBe(400);
      expect(tooMany.body.error.details).toMatchObject({ field: 'maxRefImages' });
      // A price that would let a 100,000-image batch's charge overflow its int4 column.
      const price = await t.admin('patch', '/v1/admin/models/delta').send({ creditCost: { '1K': 10_001 } });
      expect(price.status).toBe(400);
      expect(price.body.error.details).toEqual({ field: 'creditCost.1K', reason: 'out_of_range' });
      const plan = await t.admin('patch', '/v1/admin/plans/studio').send({ maxImagesPerBatch: 100_001 });
      expect(plan.status).toBe(400);
      const delta = (await t.admin('get', '/v1/admin/models').expect(200)).body.models.find((m: { key: string }) => m.key === 'delta');
      expect(delta.maxRefImages).toBe(1);
      expect(delta.creditCost['1K']).toBe(4);
    });
  });

  describe('text PostgreSQL cannot store, integers past their column, deep JSON -> 400 invalid_request, nothing changed', () => {
    const NUL = '\u0000';
    const deep = (n: number) => '{"a":' + '['.repeat(n) + ']'.repeat(n) + '}';

    it('in a batch: U+0000 in note, model, refImages[i]; a lone surrogate in a prompt; 100k-deep JSON', async () => {
      const a = await t.account();
      const up = await insertUpload(t, a.id);
      const before = await snapshot(a);
      const cases: [body: object | string, details: object][] = [
        [
          { prompts: ['a fox'], model: 'eta-image', note: `n${NUL}` },
          { field: 'note', reason: 'contains_nul' },
        ],
        [
          { prompts: ['a fox'], model: `eta-image${NUL}` },
          { field: 'model', reason: 'contains_nul' },
        ],
        [
          { prompts: ['a fox'], model: 'eta-image', refMode: 'each', refImages: [up.url, `${up.url}${NUL}`] },
          { field: 'refImages[1]', reason: 'contains_nul' },
        ],
        // Raw JSON: the escape decodes to an unpaired high surrogate.
        ['{"prompts":["ok","a fox \\ud800"],"model":"eta-image"}', { field: 'prompts[1]', reason: 'lone_surrogate' }],
        ['{"prompts":["\\udc00 trailing low"],"model":"eta-image"}', { field: 'prompts[0]', reason: 'lone_surrogate' }],
        [deep(100_000), { field: 'body', reason: 'too_deep' }],
      ];
      for (const [body, details] of cases) {
        const req = t.http.post('/v1/batches').set('Authorization', `Bearer ${a.key}`).set('Content-Type', 'application/json');
        const res = await req.send(typeof body === 'string' ? body : JSON.stringify(body));
        expect({ status: res.status, code: res.body.error?.code, details: res.body.error?.details }).toEqual({
          status: 400,
          code: 'invalid_request',
          details,
        });
      }
      expect(await snapshot(a)).toEqual(before);
      // A paired surrogate (an emoji) is ordinary text.
      expect((await postBatch(t, a, { prompts: ['a fox 😀'], model: 'eta-image' })).status).toBe(201);
    });

    it('100k-deep JSON on unauthenticated signup is refused before any parsing work', async () => {
      const started = performance.now();
      const res = await t.http.post('/v1/dashboard/signup').set('Content-Type', 'application/json').send(deep(100_000));
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'body', reason: 'too_deep' } });
      expect(performance.now() - started).toBeLessThan(1000);
      // 32 levels is still an ordinary (here: invalid) body, answered by the DTO.
      const ok = await t.http.post('/v1/dashboard/signup').set('Content-Type', 'application/json').send(deep(31));
      expect(ok.body.error.details.reason).not.toBe('too_deep');
    });

    it('dashboard signup: U+0000 in the email or the password creates no account', async () => {
      const email = `nul-${Date.now()}@example.test`;
      for (const body of [
        { email: `${email}${NUL}`, password: 'long enough password' },
        { email, password: `long enough${NUL}password` },
      ]) {
        const res = await t.http.post('/v1/dashboard/signup').send(body);
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe('invalid_request');
      }
      const [{ n }] = await t.db.query(`SELECT count(*)::int AS n FROM accounts WHERE lower(email) LIKE $1`, [`nul-%`]);
      expect(n).toBe(0);
    });

    it('keys: U+0000 in a name, creditCapPerDay >= 2^31; admin credits: U+0000 in the reason; a route parameter', async () => {
      const a = await t.account();
      const keys = async () => (await t.db.query(`SELECT count(*)::int AS n FROM api_keys WHERE account_id = $1`, [a.id]))[0].n;
      const keysBefore = await keys();
      const before = await snapshot(a);
      const refused: [res: { status: number; body: any }, details: object][] = [
        [await t.admin('post', `/v1/admin/accounts/${a.id}/keys`).send({ name: `k${NUL}` }), { field: 'name', reason: 'contains_nul' }],
        [
          await t.admin('post', `/v1/admin/accounts/${a.id}/keys`).send({ name: 'k', creditCapPerDay: 2 ** 31 }),
          { field: 'creditCapPerDay', reason: 'max' },
        ],
        [
          await t.admin('post', `/v1/admin/accounts/${a.id}/credits`).send({ amount: 5, reason: `gift${NUL}` }),
          { field: 'reason', reason: 'contains_nul' },
        ],
        [await t.admin('patch', `/v1/admin/models/delta%00x`).send({ enabled: true }), { field: 'key', reason: 'contains_nul' }],
      ];
      for (const [res, details] of refused) {
        expect({ status: res.status, code: res.body.error?.code, details: res.body.error?.details }).toEqual({
          status: 400,
          code: 'invalid_request',
          details,
        });
      }
      expect(await keys()).toBe(keysBefore);
      expect(await snapshot(a)).toEqual(before);
      // The largest int4 is a legal cap.
      await t
        .admin('post', `/v1/admin/accounts/${a.id}/keys`)
        .send({ name: 'k', creditCapPerDay: 2 ** 31 - 1 })
        .expect(201);
    });
  });
});
