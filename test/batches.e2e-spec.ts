import { nextUtcMidnight } from '@app/billing';
import { TestAccount, TestApp, batchCount, getJson, insertUpload, postBatch, taskRows } from '@app/testing';
import { bootBatchesApp } from './helpers/apps';

/** POST /v1/batches validation (docs/api.md#validation-order), fan-out (docs/api.md#image-count-per-refmode), detail and /me. */
describe('Batches: creation, validation and detail', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootBatchesApp();
  });
  afterAll(() => t.close());

  /** A refused request answers `status`/`code`/`details` and writes nothing: no batch, no charge. */
  async function expectRefused(a: TestAccount, body: unknown, status: number, code: string, details?: unknown) {
    const before = await t.balance(a.id);
    const batchesBefore = await batchCount(t, a.id);
    const res = await postBatch(t, a, body);
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status, code });
    expect(typeof res.body.error.message).toBe('string');
    if (details !== undefined) expect(res.body.error.details).toEqual(details);
    expect(await t.balance(a.id)).toBe(before);
    expect(await batchCount(t, a.id)).toBe(batchesBefore);
    expect(await t.ledgerSum(a.id)).toBe(before);
    return res;
  }

  const ok = { prompts: ['a red fox'], model: 'eta-image' };

  describe('step 2: body shape -> 400 invalid_request { field, reason }', () => {
    const cases: [string, Record<string, unknown>, string, string][] = [
      ['prompts missing', { model: 'eta-image' }, 'prompts', 'isArray'],
      ['prompts not an array', { prompts: 'a fox', model: 'eta-image' }, 'prompts', 'isArray'],
      ['prompts empty', { prompts: [], model: 'eta-image' }, 'prompts', 'arrayMinSize'],
      ['1001 prompts', { prompts: Array(1001).fill('a'), model: 'eta-image' }, 'prompts', 'arrayMaxSize'],
      ['a prompt that is not a string', { prompts: ['a', 5], model: 'eta-image' }, 'prompts', 'isString'],
      ['a blank prompt', { prompts: ['a', ' \t\n '], model: 'eta-image' }, 'prompts[1]', 'blank'],
      ['an empty prompt', { prompts: [''], model: 'eta-image' }, 'prompts[0]', 'blank'],
      ['a prompt with U+0000', { prompts: ['ok', 'a\u0000b'], model: 'eta-image' }, 'prompts[1]', 'contains_nul'],
      ['model missing', { prompts: ['a'] }, 'model', 'isString'],
      ['model not a string', { prompts: ['a'], model: 7 }, 'model', 'isString'],
      ['aspectRatio not w:h', { ...ok, aspectRatio: '16x9' }, 'aspectRatio', 'matches'],
      ['aspectRatio 0:1', { ...ok, aspectRatio: '0:1' }, 'aspectRatio', 'matches'],
      ['aspectRatio not a string', { ...ok, aspectRatio: 169 }, 'aspectRatio', 'isString'],
      ['resolution outside the enum', { ...ok, resolution: '8K' }, 'resolution', 'isIn'],
      ['countPerCombo 0', { ...ok, countPerCombo: 0 }, 'countPerCombo', 'min'],
      ['countPerCombo 21', { ...ok, countPerCombo: 21 }, 'countPerCombo', 'max'],
      ['countPerCombo 1.5', { ...ok, countPerCombo: 1.5 }, 'countPerCombo', 'isInt'],
      ['countPerCombo as a string', { ...ok, countPerCombo: '2' }, 'countPerCombo', 'isInt'],
      ['refMode outside the enum', { ...ok, refMode: 'all' }, 'refMode', 'isIn'],
      ['refImages not an array', { ...ok, refMode: 'each', refImages: 'http://x' }, 'refImages', 'isArray'],
      ['refImages with a non-string', { ...ok, refMode: 'each', refImages: [1] }, 'refImages', 'isString'],
      ['refMode each without refImages', { ...ok, refMode: 'each' }, 'refImages', 'required_for_ref_mode'],
      ['refMode combined with empty refImages', { ...ok, refMode: 'combined', refImages: [] }, 'refImages', 'required_for_ref_mode'],
      [
        'refImages with refMode none',
        { ...ok, refImages: ['http://kiln.test/files/uploads/x/a.png'] },
        'refImages',
        'not_allowed_with_ref_mode_none',
      ],
      ['quality outside the enum', { ...ok, quality: 'ultra' }, 'quality', 'isIn'],
      ['background a colour name', { ...ok, background: 'red' }, 'background', 'matches'],
      ['background #RGB', { ...ok, background: '#fff' }, 'background', 'matches'],
      ['background not a string', { ...ok, background: 5 }, 'background', 'isString'],
      ['note over 1000 characters', { ...ok, note: 'n'.repeat(1001) }, 'note', 'maxLength'],
      ['note not a string', { ...ok, note: 5 }, 'note', 'isString'],
      ['an unknown field', { ...ok, prompt: 'typo' }, 'prompt', 'unknown_field'],
    ];
    it.each(cases)('%s', async (_name, body, field, reason) => {
      const a = await t.account();
      await expectRefused(a, body, 400, 'invalid_request', { field, reason });
    });

    it('malformed JSON and a non-object body', async () => {
      const a = await t.account();
      const res = await t.http
        .post('/v1/batches')
        .set('Authorization', `Bearer ${a.key}`)
        .set('Content-Type', 'application/json')
        .send('{"prompts": [');
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'body', reason: 'malformed_json' } });
      await expectRefused(a, ['a'], 400, 'invalid_request');
    });
  });

  it('step 3: unknown model -> 400 unknown_model { model }', async () => {
    const a = await t.account();
    await expectRefused(a, { prompts: ['a'], model: 'no-such-model' }, 400, 'unknown_model', { model: 'no-such-model' });
  });

  it('step 4: illegal ratio x resolution -> 400 size_not_allowed { aspectRatio, resolution, allowed }', async () => {
    const a = await t.account();
    const res = await expectRefused(
      a,
      { prompts: ['a'], model: 'alpha-image-2', aspectRatio: '21:9', resolution: '4K' },
      400,
      'size_not_allowed',
    );
    const { details } = res.body.error;
    expect(details.aspectRatio).toBe('21:9');
    expect(details.resolution).toBe('4K');
    expect(details.allowed['21:9']).toEqual(['1K', '2K']);
    expect(details.allowed['16:9']).toEqual(['1K', '2K', '4K']);
    expect(Object.keys(details.allowed)).toHaveLength(10);
    // A resolution the model does not price, and a ratio it does not offer.
    await expectRefused(a, { prompts: ['a'], model: 'eta-image', resolution: '2K' }, 400, 'size_not_allowed');
    await expectRefused(a, { prompts: ['a'], model: 'eta-image', aspectRatio: '7:5' }, 400, 'size_not_allowed');
  });

  describe('step 5: references', () => {
    it('a text-only model -> 400 refs_not_supported', async () => {
      const a = await t.account();
      const up = await insertUpload(t, a.id);
      await expectRefused(a, { prompts: ['a'], model: 'test-text-only', refMode: 'each', refImages: [up.url] }, 400, 'refs_not_supported', {
        model: 'test-text-only',
      });
      // Without references the same model is fine.
      expect((await postBatch(t, a, { prompts: ['a'], model: 'test-text-only' })).status).toBe(201);
    });

    it('more than the model accepts -> 400 too_many_ref_images { max, given }', async () => {
      const a = await t.account();
      const refs = [(await insertUpload(t, a.id)).url, (await insertUpload(t, a.id)).url];
      await expectRefused(a, { prompts: ['a'], model: 'delta', refMode: 'combined', refImages: refs }, 400, 'too_many_ref_images', {
        max: 1,
        given: 2,
      });
    });

    it("another account's upload, or a URL never uploaded -> 400 invalid_request { refImages[i], unknown_upload }", async () => {
      const a = await t.account();
      const b = await t.account();
      const mine = await insertUpload(t, a.id);
      const theirs = await insertUpload(t, b.id);
      await expectRefused(
        a,
        { prompts: ['a'], model: 'beta-2', refMode: 'each', refImages: [mine.url, theirs.url] },
        400,
        'invalid_request',
        {
          field: 'refImages[1]',
          reason: 'unknown_upload',
        },
      );
      await expectRefused(
        a,
        { prompts: ['a'], model: 'beta-2', refMode: 'combined', refImages: ['not a url', mine.url] },
        400,
        'invalid_request',
        {
          field: 'refImages[0]',
          reason: 'unknown_upload',
        },
      );
    });
  });

  describe('step 6: prompts', () => {
    it("longer than the model's maxPromptLength (code points) -> 400 prompt_too_long { index, maxLength }", async () => {
      const a = await t.account();
      await expectRefused(a, { prompts: ['ok', 'ok', 'x'.repeat(4001)], model: 'eta-image' }, 400, 'prompt_too_long', {
        index: 2,
        maxLength: 4000,
      });
      // 4000 astral characters are 8000 UTF-16 units but 4000 characters: accepted.
      const res = await postBatch(t, a, { prompts: ['🦊'.repeat(4000)], model: 'eta-image' });
      expect(res.status).toBe(201);
    });

    it('blocked by the content policy -> 400 content_blocked { index }', async () => {
      const a = await t.account();
      await expectRefused(a, { prompts: ['a cat', 'some CSAM please'], model: 'eta-image' }, 400, 'content_blocked', { index: 1 });
      await expectRefused(a, { prompts: ['naked   children on a beach'], model: 'eta-image' }, 400, 'content_blocked', { index: 0 });
      // Whole words only: innocent words containing a blocked term pass.
      const res = await postBatch(t, a, { prompts: ['scampi on a plate', 'a child flying a kite'], model: 'eta-image' });
      expect(res.status).toBe(201);
    });
  });

  describe('step 7: plan limits', () => {
    it('more images than the plan allows -> 403 batch_limit_exceeded { total, max }', async () => {
      const a = await t.account({ plan: 'starter' });
      await expectRefused(a, { prompts: Array(11).fill('a'), model: 'eta-image' }, 403, 'batch_limit_exceeded', { total: 11, max: 10 });
      const refs = [(await insertUpload(t, a.id)).url, (await insertUpload(t, a.id)).url];
      // each: 2 prompts x 2 refs x 3 copies = 12 images.
      await expectRefused(
        a,
        { prompts: ['a', 'b'], model: 'beta-2', refMode: 'each', refImages: refs, countPerCombo: 3 },
        403,
        'batch_limit_exceeded',
        {
          total: 12,
          max: 10,
        },
      );
    });

    it('too many unfinished batches -> 403 concurrent_limit_exceeded { active, max }', async () => {
      const a = await t.account({ plan: 'starter' });
      const first = await postBatch(t, a, ok);
      expect(first.status).toBe(201);
      await expectRefused(a, ok, 403, 'concurrent_limit_exceeded', { active: 1, max: 1 });
      await t.db.query(`UPDATE batches SET finished_at = now() WHERE id = $1`, [first.body.id]);
      expect((await postBatch(t, a, ok)).status).toBe(201);
    });
  });

  describe('step 8: money', () => {
    it('balance below the cost -> 402 insufficient_credits { required, balance }', async () => {
      const a = await t.account({ credits: 15 });
      // beta-2 at 2K costs 6: 3 images = 18 > 15.
      await expectRefused(a, { prompts: ['a', 'b', 'c'], model: 'beta-2', resolution: '2K' }, 402, 'insufficient_credits', {
        required: 18,
        balance: 15,
      });
      expect((await postBatch(t, a, { prompts: ['a', 'b'], model: 'beta-2', resolution: '2K' })).status).toBe(201);
      expect(await t.balance(a.id)).toBe(3);
    });

    it("past the key's daily cap -> 402 daily_credit_cap_exceeded { cap, used, required, resetsAt }", async () => {
      const a = await t.account({ credits: 1000, creditCapPerDay: 10 });
      expect((await postBatch(t, a, { prompts: ['a', 'b'], model: 'beta-2' })).status).toBe(201); // 8
      await expectRefused(a, { prompts: ['a'], model: 'beta-2' }, 402, 'daily_credit_cap_exceeded', {
        cap: 10,
        used: 8,
        required: 4,
        resetsAt: nextUtcMidnight(),
      });
      // Exactly reaching the cap is allowed.
      expect((await postBatch(t, a, { prompts: ['a', 'b'], model: 'eta-image' })).status).toBe(201);
      expect(await t.balance(a.id)).toBe(990);
    });
  });

  describe('the first failing step answers', () => {
    it('shape before model, model before size, size before references', async () => {
      const a = await t.account({ plan: 'starter', credits: 0 });
      await expectRefused(a, { prompts: ['  '], model: 'no-such-model' }, 400, 'invalid_request');
      await expectRefused(a, { prompts: ['csam'], model: 'no-such-model', aspectRatio: '7:5' }, 400, 'unknown_model');
      await expectRefused(
        a,
        { prompts: ['csam'], model: 'delta', aspectRatio: '7:5', refMode: 'each', refImages: ['x', 'y'] },
        400,
        'size_not_allowed',
      );
    });

    it('references before prompts, prompt length before content, prompts before plan, plan before money', async () => {
      const a = await t.account({ plan: 'starter', credits: 0, creditCapPerDay: 1 });
      await expectRefused(
        a,
        { prompts: ['csam', 'x'.repeat(5000)], model: 'delta', refMode: 'each', refImages: ['x', 'y'] },
        400,
        'too_many_ref_images',
      );
      await expectRefused(
        a,
        { prompts: ['csam', 'x'.repeat(5000)], model: 'delta', refMode: 'each', refImages: ['x'] },
        400,
        'invalid_request',
        {
          field: 'refImages[0]',
          reason: 'unknown_upload',
        },
      );
      await expectRefused(a, { prompts: ['csam', 'x'.repeat(5000)], model: 'eta-image' }, 400, 'prompt_too_long', {
        index: 1,
        maxLength: 4000,
      });
      await expectRefused(a, { prompts: Array(11).fill('csam'), model: 'eta-image' }, 400, 'content_blocked', { index: 0 });
      await expectRefused(a, { prompts: Array(11).fill('a'), model: 'eta-image' }, 403, 'batch_limit_exceeded');
      await expectRefused(a, { prompts: Array(2).fill('a'), model: 'eta-image' }, 402, 'insufficient_credits', { required: 2, balance: 0 });
    });

    it('insufficient_credits before daily_credit_cap_exceeded', async () => {
      const a = await t.account({ credits: 3, creditCapPerDay: 1 });
      await expectRefused(a, { prompts: ['a', 'b', 'c', 'd'], model: 'eta-image' }, 402, 'insufficient_credits', {
        required: 4,
        balance: 3,
      });
      await expectRefused(a, { prompts: ['a', 'b'], model: 'eta-image' }, 402, 'daily_credit_cap_exceeded');
    });
  });

  describe('fan-out, charge and stored batch', () => {
    it('refMode none: prompts x countPerCombo, prompt order then copy index', async () => {
      const a = await t.account({ credits: 100 });
      const res = await postBatch(t, a, { prompts: ['p0', 'p1', 'p2'], model: 'beta-2', countPerCombo: 2 });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ id: expect.any(String), total: 6, creditsCharged: 24, status: 'pending', tier: 'standard' });
      const tasks = await taskRows(t, res.body.id);
      expect(tasks.map((x) => [x.seq, x.prompt, x.ref_upload_ids])).toEqual([
        [0, 'p0', []],
        [1, 'p0', []],
        [2, 'p1', []],
        [3, 'p1', []],
        [4, 'p2', []],
        [5, 'p2', []],
      ]);
      expect(await t.balance(a.id)).toBe(76);
      expect(await t.ledgerSum(a.id)).toBe(76);
    });

    it('refMode each: prompts x refs x countPerCombo, prompt then reference then copy, one ref per task', async () => {
      const a = await t.account({ credits: 500 });
      const refs = [await insertUpload(t, a.id, 'r0.png'), await insertUpload(t, a.id, 'r1.png'), await insertUpload(t, a.id, 'r2.png')];
      const res = await postBatch(t, a, {
        prompts: ['p0', 'p1'],
        model: 'alpha-image-2',
        resolution: '2K',
        refMode: 'each',
        refImages: refs.map((r) => r.url),
        countPerCombo: 2,
      });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ total: 12, creditsCharged: 120 });
      const tasks = await taskRows(t, res.body.id);
      const expected: [number, string, string[]][] = [];
      for (const p of ['p0', 'p1']) for (const r of refs) for (let c = 0; c < 2; c++) expected.push([expected.length, p, [r.id]]);
      expect(tasks.map((x) => [x.seq, x.prompt, x.ref_upload_ids])).toEqual(expected);
      expect(await t.balance(a.id)).toBe(380);
      expect(await t.ledgerSum(a.id)).toBe(380);
    });

    it('refMode combined: prompts x countPerCombo, every reference on every task', async () => {
      const a = await t.account({ credits: 100 });
      const refs = [await insertUpload(t, a.id), await insertUpload(t, a.id)];
      const res = await postBatch(t, a, {
        prompts: ['p0', 'p1'],
        model: 'gamma-5-flash',
        refMode: 'combined',
        refImages: refs.map((r) => r.url),
        countPerCombo: 3,
      });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ total: 6, creditsCharged: 18 });
      const tasks = await taskRows(t, res.body.id);
      expect(tasks.map((x) => x.prompt)).toEqual(['p0', 'p0', 'p0', 'p1', 'p1', 'p1']);
      for (const task of tasks) expect(task.ref_upload_ids).toEqual(refs.map((r) => r.id));
      expect(await t.balance(a.id)).toBe(82);
    });

    it('stores the price, size, provider snapshot and options; seeds are deterministic and distinct', async () => {
      const a = await t.account();
      const res = await postBatch(t, a, {
        prompts: ['p'],
        model: 'alpha-image-2',
        aspectRatio: '16:9',
        countPerCombo: 3,
        quality: 'high',
        background: '#AABBCC',
        note: 'campaign 7',
      });
      expect(res.status).toBe(201);
      const [row] = await t.db.query(`SELECT * FROM batches WHERE id = $1`, [res.body.id]);
      expect(row).toMatchObject({
        account_id: a.id,
        api_key_id: a.keyId,
        model: 'alpha-image-2',
        aspect_ratio: '16:9',
        resolution: '1K',
        quality: 'high',
        background: '#AABBCC',
        count_per_combo: 3,
        ref_mode: 'none',
        ref_images: [],
        total: 3,
        note: 'campaign 7',
        unit_cost: 5,
        credits_charged: 15,
        credits_refunded: 0,
        provider: { type: 'builtin' },
        width: 1360,
        height: 768,
        status: 'pending',
        created_via_api: true,
        finished_at: null,
      });
      const [ledger] = await t.db.query(`SELECT * FROM ledger_entries WHERE batch_id = $1`, [res.body.id]);
      expect(ledger).toMatchObject({ kind: 'batch_charge', amount: '-15', api_key_id: a.keyId });
      const seeds = (await taskRows(t, res.body.id)).map((x) => x.seed);
      expect(new Set(seeds).size).toBe(3);
      for (const s of seeds) expect(Number.isInteger(s) && s >= 0 && s < 2 ** 31).toBe(true);
    });

    it('defaults: 1:1, 1K, one copy, refMode none, quality auto, background and note null', async () => {
      const a = await t.account();
      const res = await postBatch(t, a, ok);
      const detail = await getJson(t, a, `/v1/batches/${res.body.id}`).expect(200);
      expect(detail.body.batch).toMatchObject({
        aspectRatio: '1:1',
        resolution: '1K',
        countPerCombo: 1,
        refMode: 'none',
        refImages: [],
        quality: 'auto',
        background: null,
        note: null,
      });
    });
  });

  describe('GET /v1/batches/{id}', () => {
    it('returns the Batch object with done, credits and status, and its tasks in fan-out order', async () => {
      const a = await t.account();
      const refs = [await insertUpload(t, a.id), await insertUpload(t, a.id)];
      const created = await postBatch(t, a, {
        prompts: ['first', 'second'],
        model: 'beta-2',
        refMode: 'each',
        refImages: refs.map((r) => r.url),
        background: 'transparent',
      });
      expect(created.status).toBe(201);
      const res = await getJson(t, a, `/v1/batches/${created.body.id}`).expect(200);
      expect(Object.keys(res.body).sort()).toEqual(['batch', 'tasks']);
      const { batch, tasks } = res.body;
      expect(Object.keys(batch).sort()).toEqual(
        [
          'aspectRatio',
          'background',
          'cancelledAt',
          'countPerCombo',
          'counts',
          'createdAt',
          'createdViaApi',
          'creditsCharged',
          'creditsRefunded',
          'done',
          'id',
          'model',
          'note',
          'outputFormat',
          'previewUrl',
          'prompts',
          'quality',
          'refImages',
          'refMode',
          'resolution',
          'seed',
          'status',
          'total',
          'tier',
          'expiresAt',
          'deadline',
          'cancelReason',
        ].sort(),
      );
      expect(batch).toMatchObject({
        id: created.body.id,
        prompts: ['first', 'second'],
        model: 'beta-2',
        refImages: refs.map((r) => r.url),
        background: 'transparent',
        total: 4,
        counts: { pending: 4, running: 0, succeeded: 0, failed: 0 },
        previewUrl: null,
        createdViaApi: true,
        status: 'pending',
        done: false,
        creditsCharged: 16,
        creditsRefunded: 0,
      });
      expect(Math.abs(batch.createdAt - Date.now())).toBeLessThan(60_000);
      expect(tasks).toHaveLength(4);
      expect(tasks.map((x: any) => x.prompt)).toEqual(['first', 'first', 'second', 'second']);
      for (const task of tasks) {
        expect(Object.keys(task).sort()).toEqual([
          'batchId',
          'cancelling',
          'copy',
          'error',
          'errorCode',
          'finishedAt',
          'height',
          'id',
          'index',
          'progress',
          'prompt',
          'promptIndex',
          'refImage',
          'resultUrls',
          'startedAt',
          'status',
          'width',
        ]);
        expect(task).toMatchObject({
          batchId: created.body.id,
          status: 'queued',
          startedAt: null,
          finishedAt: null,
          progress: 0,
          resultUrls: [],
          error: null,
          errorCode: null,
          width: null,
          height: null,
        });
      }
    });

    it('counts, status, done, resultUrls and error follow the tasks', async () => {
      const a = await t.account();
      const created = await postBatch(t, a, { prompts: ['a', 'b', 'c', 'd'], model: 'eta-image' });
      const id = created.body.id;
      const rows = await taskRows(t, id);
      const set = (i: number, sql: string, params: unknown[] = []) =>
        t.db.query(`UPDATE tasks SET ${sql} WHERE id = $1`, [rows[i].id, ...params]);

      // Claimed but waiting for a slot: shown queued, not running.
      await set(0, `status = 'running', progress = 0, sent_at = NULL`);
      let res = await getJson(t, a, `/v1/batches/${id}`).expect(200);
      expect(res.body.batch).toMatchObject({ counts: { pending: 4, running: 0, succeeded: 0, failed: 0 }, status: 'pending', done: false });
      expect(res.body.tasks[0]).toMatchObject({ status: 'queued', progress: 0 });

      await set(0, `status = 'running', progress = 40, sent_at = now()`);
      res = await getJson(t, a, `/v1/batches/${id}`).expect(200);
      expect(res.body.batch).toMatchObject({ counts: { pending: 3, running: 1, succeeded: 0, failed: 0 }, status: 'running', done: false });
      expect(res.body.tasks[0]).toMatchObject({ status: 'running', progress: 40 });

      await set(0, `status = 'succeeded', progress = 100, result_url = $2`, ['http://kiln.test/files/results/x/0.png']);
      await set(1, `status = 'failed', progress = 10, error = 'Upstream refused the prompt'`);
      await set(2, `status = 'succeeded', progress = 100, result_url = 'http://kiln.test/files/results/x/2.png'`);
      res = await getJson(t, a, `/v1/batches/${id}`).expect(200);
      expect(res.body.batch).toMatchObject({ counts: { pending: 1, running: 0, succeeded: 2, failed: 1 }, status: 'running', done: false });

      await set(3, `status = 'succeeded', progress = 100, result_url = 'http://kiln.test/files/results/x/3.png'`);
      res = await getJson(t, a, `/v1/batches/${id}`).expect(200);
      expect(res.body.batch).toMatchObject({ counts: { pending: 0, running: 0, succeeded: 3, failed: 1 }, status: 'partial', done: true });
      expect(res.body.tasks[0]).toMatchObject({
        status: 'succeeded',
        progress: 100,
        resultUrls: ['http://kiln.test/files/results/x/0.png'],
        error: null,
      });
      expect(res.body.tasks[1]).toMatchObject({ status: 'failed', progress: 10, resultUrls: [], error: 'Upstream refused the prompt' });

      const listed = await getJson(t, a, '/v1/batches').expect(200);
      expect(listed.body.batches[0]).toMatchObject({
        id,
        counts: { pending: 0, running: 0, succeeded: 3, failed: 1 },
        status: 'partial',
        done: true,
      });
    });

    it("another account's batch, a malformed id and an unknown id -> 404 not_found", async () => {
      const a = await t.account();
      const b = await t.account();
      const created = await postBatch(t, a, ok);
      await getJson(t, a, `/v1/batches/${created.body.id}`).expect(200);
      for (const id of [created.body.id, 'not-a-uuid', '00000000-0000-4000-8000-000000000000', `${created.body.id}x`]) {
        const res = await getJson(t, b, `/v1/batches/${encodeURIComponent(id)}`);
        expect(res.status).toBe(404);
        expect(res.body.error.code).toBe('not_found');
      }
      const list = await getJson(t, b, '/v1/batches').expect(200);
      expect(list.body).toEqual({ batches: [], nextCursor: null });
    });
  });

  describe('GET /v1/batches', () => {
    it('pages newest first over (createdAt, id) with no gap and no duplicate, ties included', async () => {
      const a = await t.account({ plan: 'scale' });
      const viaApi: string[] = [];
      for (let i = 0; i < 3; i++) viaApi.push((await postBatch(t, a, { prompts: [`api ${i}`], model: 'eta-image' }).expect(201)).body.id);
      // 22 more rows copied from the first, in groups sharing one created_at, so ties must break on id.
      await t.db.query(
        `INSERT INTO batches (account_id, api_key_id, prompts, model, aspect_ratio, resolution, quality, background,
           count_per_combo, ref_mode, ref_images, total, note, unit_cost, credits_charged, provider, width, height,
           created_via_api, created_at)
         SELECT account_id, api_key_id, prompts, model, aspect_ratio, resolution, quality, background, count_per_combo,
                ref_mode, ref_images, total, 'copy ' || g, unit_cost, credits_charged, provider, width, height,
                created_via_api, created_at - ((g / 4) || ' seconds')::interval
           FROM batches, generate_series(1, 22) AS g WHERE id = $1`,
        [viaApi[0]],
      );
      const expected: { id: string; created_at: Date }[] = await t.db.query(
        `SELECT id, created_at FROM batches WHERE account_id = $1 ORDER BY created_at DESC, id DESC`,
        [a.id],
      );
      expect(expected).toHaveLength(25);
      // viaApi[0] shares its created_at with three copies, so only the two newest have fixed places.
      expect(expected.slice(0, 2).map((r) => r.id)).toEqual([viaApi[2], viaApi[1]]);

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const q: string = cursor ? `?limit=7&cursor=${encodeURIComponent(cursor)}` : '?limit=7';
        const res = await getJson(t, a, `/v1/batches${q}`).expect(200);
        expect(res.body.batches.length).toBeLessThanOrEqual(7);
        seen.push(...res.body.batches.map((b: any) => b.id));
        cursor = res.body.nextCursor;
        pages++;
      } while (cursor && pages < 10);
      expect(pages).toBe(4);
      expect(seen).toEqual(expected.map((r) => r.id));
      expect(new Set(seen).size).toBe(25);

      const first = await getJson(t, a, '/v1/batches').expect(200);
      expect(first.body.batches).toHaveLength(20);
      expect(first.body.batches[0]).toMatchObject({
        id: viaApi[2],
        prompts: ['api 2'],
        counts: { pending: 1, running: 0, succeeded: 0, failed: 0 },
        done: false,
        status: 'pending',
      });
      // The copies have no tasks: all counts zero.
      const copy = first.body.batches.find((b: any) => String(b.note).startsWith('copy'));
      expect(copy.counts).toEqual({ pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0, cancelling: 0 });
      const all = await getJson(t, a, '/v1/batches?limit=100').expect(200);
      expect(all.body.batches).toHaveLength(25);
      expect(all.body.nextCursor).toBeNull();
    });

    it('a bad limit or cursor -> 400 invalid_request', async () => {
      const a = await t.account();
      for (const [q, field] of [
        ['limit=0', 'limit'],
        ['limit=101', 'limit'],
        ['limit=abc', 'limit'],
        ['limit=1.5', 'limit'],
        ['limit=5&limit=6', 'limit'],
        ['cursor=garbage', 'cursor'],
        [`cursor=${Buffer.from('["yesterday","x"]').toString('base64url')}`, 'cursor'],
        ['other=1', 'other'],
      ]) {
        const res = await getJson(t, a, `/v1/batches?${q}`);
        expect({ q, status: res.status, code: res.body.error?.code, field: res.body.error?.details?.field }).toEqual({
          q,
          status: 400,
          code: 'invalid_request',
          field,
        });
      }
    });
  });

  describe('scopes', () => {
    it('POST needs batches:write, GET needs batches:read -> 403 insufficient_scope', async () => {
      const reader = await t.account({ scopes: ['batches:read'] });
      const res = await postBatch(t, reader, ok);
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'insufficient_scope', details: { required: 'batches:write' } });
      expect(await batchCount(t, reader.id)).toBe(0);
      await getJson(t, reader, '/v1/batches').expect(200);

      const writer = await t.account({ scopes: ['batches:write'] });
      expect((await postBatch(t, writer, ok)).status).toBe(201);
      for (const path of ['/v1/batches', '/v1/batches/00000000-0000-4000-8000-000000000000']) {
        const r = await getJson(t, writer, path);
        expect(r.status).toBe(403);
        expect(r.body.error.code).toBe('insufficient_scope');
      }
    });
  });

  it('GET /v1/me reports the active batches and the credits used today through the key', async () => {
    const a = await t.account({ credits: 100, creditCapPerDay: 50 });
    const other = await t.admin('post', `/v1/admin/accounts/${a.id}/keys`).send({}).expect(201);
    const before = await getJson(t, a, '/v1/me').expect(200);
    expect(before.body.limits.activeBatches).toBe(0);
    expect(before.body.key.creditsUsedToday).toBe(0);

    await postBatch(t, a, { prompts: ['a', 'b'], model: 'beta-2' }).expect(201); // 8
    const second = await postBatch(t, a, { prompts: ['a'], model: 'alpha-image-2', countPerCombo: 2 }).expect(201); // 10
    await t.http
      .post('/v1/batches')
      .set('Authorization', `Bearer ${other.body.secret}`)
      .send({ prompts: ['a'], model: 'eta-image' })
      .expect(201);

    const me = await getJson(t, a, '/v1/me').expect(200);
    expect(me.body.limits.activeBatches).toBe(3);
    expect(me.body.key).toMatchObject({ creditCapPerDay: 50, creditsUsedToday: 18 });
    expect(me.body.credits.balance).toBe(81);

    await t.db.query(`UPDATE batches SET finished_at = now() WHERE id = $1`, [second.body.id]);
    expect((await getJson(t, a, '/v1/me').expect(200)).body.limits.activeBatches).toBe(2);
  });

  it('the OpenAPI document describes the three endpoints and the request schema', async () => {
    const doc = (await t.http.get('/v1/openapi.json').expect(200)).body;
    expect(Object.keys(doc.paths['/v1/batches']).sort()).toEqual(['get', 'post']);
    expect(doc.paths['/v1/batches/{id}'].get).toBeDefined();
    const schema = doc.components.schemas.CreateBatchRequestDto;
    expect(schema.required.sort()).toEqual(['model', 'prompts']);
    expect(Object.keys(schema.properties).sort()).toEqual(
      [
        'aspectRatio',
        'background',
        'countPerCombo',
        'model',
        'note',
        'outputFormat',
        'prompts',
        'quality',
        'refImages',
        'refMode',
        'resolution',
        'seed',
        'tier',
        'deadline',
      ].sort(),
    );
    expect(schema.properties.resolution.enum).toEqual(['1K', '2K', '4K']);
    expect(schema.properties.countPerCombo).toMatchObject({ minimum: 1, maximum: 20, default: 1 });
    expect(doc.components.schemas.BatchDto.properties.counts).toBeDefined();
    expect(doc.components.schemas.TaskDto.properties.resultUrls.type).toBe('array');
  });
});
