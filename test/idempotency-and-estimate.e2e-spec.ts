import { Client } from 'pg';
import { nextUtcMidnight } from '@app/billing';
import { sweepExpiredIdempotencyKeys } from '@app/idempotency';
import { TestAccount, TestApp, batchCount, bearer, postBatch } from '@app/testing';
import { bootBatchesApp } from './helpers/apps';

/** Idempotent create (Idempotency-Key) and POST /v1/batches/estimate. */
describe('Idempotent create and estimate', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootBatchesApp();
  });
  afterAll(() => t.close());

  const body = { prompts: ['a red fox', 'a blue whale'], model: 'eta-image', countPerCombo: 2, note: 'run 1' };

  function post(a: TestAccount, key: string | null, payload: unknown, path = '/v1/batches') {
    const req = t.http.post(path).set('Authorization', bearer(a)).set('Content-Type', 'application/json');
    if (key !== null) req.set('Idempotency-Key', key);
    return req.send(typeof payload === 'string' ? payload : JSON.stringify(payload));
  }

  /** Everything a creation changes, to show that something changed nothing. */
  async function snapshot(a: TestAccount) {
    const [keys] = await t.db.query(`SELECT count(*)::int AS n FROM idempotency_keys WHERE account_id = $1`, [a.id]);
    const [tasks] = await t.db.query(`SELECT count(*)::int AS n FROM tasks WHERE account_id = $1`, [a.id]);
    return {
      balance: await t.balance(a.id),
      ledger: await t.ledgerSum(a.id),
      batches: await batchCount(t, a.id),
      tasks: tasks.n,
      keys: keys.n,
    };
  }

  describe('Idempotency-Key', () => {
    it('the same body in another key order and spacing answers the first 201 again, charging once', async () => {
      const a = await t.account({ credits: 1000 });
      const first = await post(a, 'order-4711', body);
      expect(first.status).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const after = await snapshot(a);
      expect(after).toMatchObject({ balance: 1000 - 4, batches: 1, tasks: 4, keys: 1 });

      const reordered = `{ "note":"run 1",\n  "countPerCombo" : 2, "model":"eta-image",   "prompts":["a red fox","a blue whale"] }`;
      const again = await post(a, 'order-4711', reordered);
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      expect(await snapshot(a)).toEqual(after);
    });

    it('the same key with a different body is 422 idempotency_key_reused and changes nothing', async () => {
      const a = await t.account({ credits: 1000 });
      expect((await post(a, 'k-1', body)).status).toBe(201);
      const before = await snapshot(a);
      for (const other of [
        { ...body, note: 'run 2' },
        { ...body, countPerCombo: 3 },
      ]) {
        const res = await post(a, 'k-1', other);
        expect(res.status).toBe(422);
        expect(res.body.error).toMatchObject({ code: 'idempotency_key_reused', details: { key: 'k-1' } });
      }
      // The dashboard's create is another route: the key is the account's, the request differs.
      expect(await snapshot(a)).toEqual(before);
    });

    it('refuses a malformed key with 400 invalid_request { field: Idempotency-Key }', async () => {
      const a = await t.account({ credits: 1000 });
      for (const key of ['x'.repeat(256), 'tab\there', 'caf\u00e9']) {
        const res = await post(a, key, body);
        expect({ status: res.status, code: res.body.error?.code, field: res.body.error?.details?.field }).toEqual({
          status: 400,
          code: 'invalid_request',
          field: 'Idempotency-Key',
        });
      }
      expect((await post(a, 'x'.repeat(255), body)).status).toBe(201);
      expect((await post(a, ' ~!"#$%&()*+,-./09:;<=>?@AZ[\\]^_`az{|}', body)).status).toBe(201);
      expect(await batchCount(t, a.id)).toBe(2);
    });

    it('20 racing requests with one key create and charge one batch; the others replay it or are told to retry', async () => {
      const a = await t.account({ credits: 1000 });
      const results = await Promise.all(Array.from({ length: 20 }, () => post(a, 'race', body)));
      const statuses = results.map((r) => r.status);
      expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
      const created = results.filter((r) => r.status === 201);
      expect(created.filter((r) => r.headers['idempotent-replayed'] !== 'true')).toHaveLength(1);
      expect(new Set(created.map((r) => r.body.id)).size).toBe(1);
      for (const busy of results.filter((r) => r.status === 409)) {
        expect(busy.body.error.code).toBe('idempotency_key_in_use');
        expect(busy.headers['retry-after']).toBe('1');
      }
      expect(await snapshot(a)).toMatchObject({ balance: 1000 - 4, ledger: 1000 - 4, batches: 1, tasks: 4, keys: 1 });
    });

    it('409 idempotency_key_in_use with Retry-After: 1 while the first request holds the key, then it goes through', async () => {
      const a = await t.account({ credits: 1000 });
      // Stands in for a first request still inside its transaction.
      const holder = new Client({ connectionString: process.env.DATABASE_URL });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`idempotency:${a.id}:held`]);
        const before = await snapshot(a);
        const busy = await post(a, 'held', body);
        expect(busy.status).toBe(409);
        expect(busy.body.error).toMatchObject({ code: 'idempotency_key_in_use', details: { key: 'held' } });
        expect(busy.headers['retry-after']).toBe('1');
        expect(await snapshot(a)).toEqual(before);
        // Another key of the same account is not held up.
        expect((await post(a, 'other', body)).status).toBe(201);
        await holder.query('ROLLBACK');
        const res = await post(a, 'held', body);
        expect(res.status).toBe(201);
        expect(res.headers['idempotent-replayed']).toBeUndefined();
      } finally {
        await holder.end();
      }
    });

    it('a refused first request remembers nothing: after a top-up the same key creates the batch', async () => {
      const a = await t.account({ credits: 3 });
      const refused = await post(a, 'retry-me', body);
      expect(refused.status).toBe(402);
      expect(refused.body.error.code).toBe('insufficient_credits');
      expect(await snapshot(a)).toMatchObject({ balance: 3, batches: 0, keys: 0 });

      await t.admin('post', `/v1/admin/accounts/${a.id}/credits`).send({ amount: 100, reason: 'top-up' }).expect(200);
      const res = await post(a, 'retry-me', body);
      expect(res.status).toBe(201);
      expect(res.headers['idempotent-replayed']).toBeUndefined();
      expect(await snapshot(a)).toMatchObject({ balance: 103 - 4, batches: 1, keys: 1 });
      const replay = await post(a, 'retry-me', body);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.id).toBe(res.body.id);
    });

    it('keys belong to the account: another account with the same key gets its own batch', async () => {
      const a = await t.account({ credits: 1000 });
      const b = await t.account({ credits: 1000 });
      const ra = await post(a, 'shared-name', body);
      const rb = await post(b, 'shared-name', body);
      expect([ra.status, rb.status]).toEqual([201, 201]);
      expect(rb.headers['idempotent-replayed']).toBeUndefined();
      expect(rb.body.id).not.toBe(ra.body.id);
    });

    it('a key past its 24 hours counts as unused, and the sweep removes expired keys only', async () => {
      const a = await t.account({ credits: 1000 });
      const first = await post(a, 'old', body);
      await post(a, 'fresh', body).expect(201);
      await t.db.query(`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE account_id = $1 AND key = 'old'`, [
        a.id,
      ]);

      const reused = await post(a, 'old', { ...body, note: 'a new request' });
      expect(reused.status).toBe(201);
      expect(reused.headers['idempotent-replayed']).toBeUndefined();
      expect(reused.body.id).not.toBe(first.body.id);

      await t.db.query(`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE account_id = $1 AND key = 'old'`, [
        a.id,
      ]);
      expect(await sweepExpiredIdempotencyKeys(t.db)).toBeGreaterThanOrEqual(1);
      const left = await t.db.query(`SELECT key FROM idempotency_keys WHERE account_id = $1 ORDER BY key`, [a.id]);
      expect(left.map((r: { key: string }) => r.key)).toEqual(['fresh']);
    });

    it('without the header nothing is remembered and every request creates', async () => {
      const a = await t.account({ credits: 1000 });
      await post(a, null, body).expect(201);
      await post(a, null, body).expect(201);
      expect(await snapshot(a)).toMatchObject({ batches: 2, keys: 0 });
    });
  });

  describe('POST /v1/batches/estimate', () => {
    const estimate = (a: TestAccount, payload: unknown) => post(a, null, payload, '/v1/batches/estimate');

    it('prices the batch and changes nothing', async () => {
      const a = await t.account({ credits: 1000 });
      const before = await snapshot(a);
      const res = await estimate(a, { ...body, resolution: '1K' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        total: 4,
        tier: 'standard',
        creditCost: 1,
        creditsRequired: 4,
        balance: 1000,
        dailyCap: null,
        wouldCreate: true,
        refusal: null,
      });
      expect(await snapshot(a)).toEqual(before);
    });

    it('checks 1-6 refuse exactly as create does', async () => {
      const a = await t.account({ credits: 1000 });
      const cases: unknown[] = [
        { prompts: [], model: 'eta-image' },
        { prompts: ['a'], model: 'no-such-model' },
        { prompts: ['a'], model: 'eta-image', aspectRatio: '7:3' },
        { prompts: ['a'], model: 'test-text-only', refMode: 'each', refImages: ['http://kiln.test/files/uploads/x/a.png'] },
        { prompts: ['a'], model: 'eta-image', refMode: 'each', refImages: ['http://kiln.test/files/uploads/x/a.png'] },
        { prompts: ['a'.repeat(4001)], model: 'eta-image' },
        { prompts: ['a', 'a'], model: 'eta-image', unknown: 1 },
      ];
      for (const payload of cases) {
        const [est, created] = [await estimate(a, payload), await postBatch(t, a, payload)];
        expect(est.status).toBeGreaterThanOrEqual(400);
        expect({ status: est.status, error: est.body.error }).toEqual({ status: created.status, error: created.body.error });
      }
      expect(await batchCount(t, a.id)).toBe(0);
    });

    it('reports the plan and money refusals create would answer now, with the same details', async () => {
      // starter: at most 10 images per batch and one batch at a time.
      const a = await t.account({ plan: 'starter', credits: 1000, creditCapPerDay: 6 });
      const tooMany = await estimate(a, { prompts: Array(11).fill('x'), model: 'eta-image' });
      expect(tooMany.body).toMatchObject({
        total: 11,
        wouldCreate: false,
        refusal: { code: 'batch_limit_exceeded', details: { total: 11, max: 10 } },
      });

      const capped = await estimate(a, { prompts: Array(7).fill('x'), model: 'eta-image' });
      const cappedCreate = await postBatch(t, a, { prompts: Array(7).fill('x'), model: 'eta-image' });
      expect(cappedCreate.body.error.code).toBe('daily_credit_cap_exceeded');
      expect(capped.body).toMatchObject({
        creditsRequired: 7,
        dailyCap: { cap: 6, used: 0, remaining: 6, resetsAt: nextUtcMidnight() },
        wouldCreate: false,
        refusal: { code: 'daily_credit_cap_exceeded', message: cappedCreate.body.error.message, details: cappedCreate.body.error.details },
      });

      await postBatch(t, a, { prompts: ['one'], model: 'eta-image' }).expect(201);
      const before = await snapshot(a);
      const busy = await estimate(a, { prompts: ['x'], model: 'eta-image' });
      expect(busy.body).toMatchObject({
        balance: 999,
        dailyCap: { cap: 6, used: 1, remaining: 5 },
        wouldCreate: false,
        refusal: { code: 'concurrent_limit_exceeded', details: { active: 1, max: 1 } },
      });
      expect(await snapshot(a)).toEqual(before);

      const poor = await t.account({ credits: 3 });
      const short = await estimate(poor, { prompts: ['a', 'b', 'c', 'd'], model: 'eta-image' });
      const shortCreate = await postBatch(t, poor, { prompts: ['a', 'b', 'c', 'd'], model: 'eta-image' });
      expect(short.body.refusal).toEqual(shortCreate.body.error);
      expect(short.body.refusal).toMatchObject({ code: 'insufficient_credits', details: { required: 4, balance: 3 } });
    });

    it('needs batches:read', async () => {
      const a = await t.account({ credits: 1000, scopes: ['batches:write'] });
      const res = await estimate(a, body);
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'insufficient_scope', details: { required: 'batches:read' } });
    });
  });

  describe('dashboard twins', () => {
    it('estimate and idempotent create with a session token', async () => {
      const email = `holder-${Date.now()}-${Math.random().toString(36).slice(2)}@example.test`;
      const created = await t
        .admin('post', '/v1/admin/accounts')
        .send({ email, password: 'correct horse battery', plan: 'studio', credits: 50 })
        .expect(201);
      const login = await t.http.post('/v1/dashboard/login').send({ email, password: 'correct horse battery' }).expect(200);
      const session = { key: login.body.token } as TestAccount;

      const est = await post(session, null, body, '/v1/dashboard/batches/estimate');
      expect(est.status).toBe(200);
      expect(est.body).toMatchObject({ total: 4, creditsRequired: 4, balance: 50, dailyCap: null, wouldCreate: true });

      const first = await post(session, 'dash-1', body, '/v1/dashboard/batches');
      const again = await post(session, 'dash-1', body, '/v1/dashboard/batches');
      expect([first.status, again.status]).toEqual([201, 201]);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      expect(await t.balance(created.body.account.id)).toBe(46);
      // Keys are the account's: the public route with the same key is another request.
      const key = await t.admin('post', `/v1/admin/accounts/${created.body.account.id}/keys`).send({}).expect(201);
      const viaKey = await post({ key: key.body.secret } as TestAccount, 'dash-1', body);
      expect(viaKey.status).toBe(422);
      expect(viaKey.body.error.code).toBe('idempotency_key_reused');
    });
  });
});
