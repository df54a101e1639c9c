import { randomUUID } from 'node:crypto';
import { BillingService } from '@app/billing';
import { fileEnvironment, FileEnvironment, StripeFake, TestApp } from '@app/testing';
import { bootApi } from './helpers/apps';

/*
 * Selling credits end to end: the real api on a database of its own, the official stripe SDK
 * pointed at a fake Stripe on 127.0.0.1 (STRIPE_API_BASE), events signed with the SDK's own
 * test-header helper and posted to POST /v1/stripe/webhook as Stripe would.
 */

const SECRET = 'whsec_kiln_e2e_secret';
const PASSWORD = 'correct-horse-battery';

describe('selling credits through Stripe Checkout', () => {
  const fake = new StripeFake();
  let env: FileEnvironment;
  let t: TestApp;
  let off: TestApp;

  beforeAll(async () => {
    await fake.start();
    const base = new URL(fake.apiBase);
    env = await fileEnvironment('stripe_purchases', {
      publicBaseUrl: 'http://kiln.test',
      stripe: {
        secretKey: 'sk_test_kiln_e2e',
        webhookSecret: SECRET,
        apiBase: { protocol: 'http', host: base.hostname, port: Number(base.port) },
        timeoutMs: 500,
        returnUrlBase: 'http://kiln.test/app/credits',
      },
    });
    t = await bootApi(env.config);
    // The same database with selling off (no STRIPE_SECRET_KEY).
    off = await bootApi({ ...env.config, stripe: null });
  });
  afterAll(async () => {
    await off?.close();
    await t?.close();
    await env?.teardown();
    await fake.stop();
  });

  /** A holder signed in to the dashboard: its account id and session token. */
  async function holder(credits = 0, app: TestApp = t): Promise<{ id: string; token: string; key: string }> {
    const email = `buyer-${randomUUID()}@example.test`;
    const created = await app.admin('post', '/v1/admin/accounts').send({ email, password: PASSWORD, plan: 'studio', credits }).expect(201);
    const id = created.body.account.id as string;
    const login = await app.http.post('/v1/dashboard/login').send({ email, password: PASSWORD }).expect(200);
    const key = await app.admin('post', `/v1/admin/accounts/${id}/keys`).send({}).expect(201);
    return { id, token: login.body.token as string, key: key.body.secret as string };
  }

  async function pack(body: Record<string, unknown> = {}): Promise<string> {
    const res = await t.admin('post', '/v1/admin/credit-packs').send({ credits: 1000, priceCents: 1000, currency: 'USD', ...body });
    expect(res.status).toBe(201);
    return res.body.pack.id as string;
  }

  /** POST /v1/dashboard/checkout as the holder: the session id the fake made. */
  async function checkout(h: { token: string }, packId: string): Promise<string> {
    const res = await t.http.post('/v1/dashboard/checkout').set('Authorization', `Bearer ${h.token}`).send({ packId });
    expect(res.status).toBe(200);
    return res.body.sessionId as string;
  }

  function deliver(payload: string, signature = fake.sign(payload, SECRET), app: TestApp = t) {
    return app.http
      .post('/v1/stripe/webhook')
      .set('Content-Type', 'application/json; charset=utf-8')
      .set('Stripe-Signature', signature)
      .send(payload);
  }

  async function ledger(accountId: string, kind?: string): Promise<{ kind: string; amount: number; reason: string }[]> {
    const rows = await t.db.query(
      `SELECT kind, amount, reason FROM ledger_entries WHERE account_id = $1 ${kind ? 'AND kind = $2' : ''} ORDER BY id`,
      kind ? [accountId, kind] : [accountId],
    );
    return rows.map((r: any) => ({ kind: r.kind, amount: Number(r.amount), reason: r.reason }));
  }

  async function expectConsistent(accountId: string, balance: number): Promise<void> {
    expect(await t.balance(accountId)).toBe(balance);
    expect(await t.ledgerSum(accountId)).toBe(balance);
  }

  describe('credit packs', () => {
    it('operators create, list, edit and archive packs; holders see the ones on sale', async () => {
      const id = await pack({ credits: 5000, priceCents: 4500, currency: 'eur', name: 'Studio top-up' });
      const listed = await t.admin('get', '/v1/admin/credit-packs').expect(200);
      expect(listed.body.packs).toContainEqual(
        expect.objectContaining({ id, credits: 5000, priceCents: 4500, currency: 'eur', name: 'Studio top-up', active: true }),
      );
      const edited = await t.admin('patch', `/v1/admin/credit-packs/${id}`).send({ priceCents: 4000 }).expect(200);
      expect(edited.body.pack).toMatchObject({ id, priceCents: 4000, credits: 5000 });
      const h = await holder();
      const onSale = await t.http.get('/v1/dashboard/credit-packs').set('Authorization', `Bearer ${h.token}`).expect(200);
      expect(onSale.body.packs.map((p: any) => p.id)).toContain(id);
      const archived = await t.admin('delete', `/v1/admin/credit-packs/${id}`).expect(200);
      expect(archived.body.pack.active).toBe(false);
      const after = await t.http.get('/v1/dashboard/credit-packs').set('Authorization', `Bearer ${h.token}`).expect(200);
      expect(after.body.packs.map((p: any) => p.id)).not.toContain(id);
      // Still listed for the operator: archived, never erased.
      expect((await t.admin('get', '/v1/admin/credit-packs').expect(200)).body.packs.map((p: any) => p.id)).toContain(id);
      // An archived pack cannot be bought.
      const refused = await t.http.post('/v1/dashboard/checkout').set('Authorization', `Bearer ${h.token}`).send({ packId: id });
      expect(refused.status).toBe(404);
      expect(refused.body.error.code).toBe('not_found');
    });

    it.each([
      ['no credits', { priceCents: 100, currency: 'usd' }, 'credits'],
      ['zero credits', { credits: 0, priceCents: 100, currency: 'usd' }, 'credits'],
      ['a fractional price', { credits: 10, priceCents: 1.5, currency: 'usd' }, 'priceCents'],
      ['a price over Stripe’s eight digits', { credits: 10, priceCents: 100_000_000, currency: 'usd' }, 'priceCents'],
      ['a currency that is not ISO 4217', { credits: 10, priceCents: 100, currency: 'dollars' }, 'currency'],
    ])('a pack with %s -> 400 invalid_request, nothing created', async (_, body, field) => {
      const before = (await t.admin('get', '/v1/admin/credit-packs').expect(200)).body.packs.length;
      const res = await t.admin('post', '/v1/admin/credit-packs').send(body);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
      expect(JSON.stringify(res.body.error.details)).toContain(field);
      expect((await t.admin('get', '/v1/admin/credit-packs').expect(200)).body.packs.length).toBe(before);
    });

    it('editing or archiving an unknown pack (or not an id) -> 404', async () => {
      for (const id of [randomUUID(), 'not-a-uuid']) {
        expect((await t.admin('patch', `/v1/admin/credit-packs/${id}`).send({ credits: 5 })).status).toBe(404);
        expect((await t.admin('delete', `/v1/admin/credit-packs/${id}`)).status).toBe(404);
      }
    });
  });

  describe('a purchase', () => {
    it('creates a Checkout Session with the SDK (account, pack and credits on it), and the signed completed event credits once', async () => {
      const packId = await pack({ credits: 1000, priceCents: 1250, currency: 'usd' });
      const h = await holder(0);
      const res = await t.http.post('/v1/dashboard/checkout').set('Authorization', `Bearer ${h.token}`).send({ packId }).expect(200);
      const sessionId = res.body.sessionId as string;
      expect(res.body.url).toBe(`${fake.originUrl}/c/pay/${sessionId}`);
      // What the SDK sent, as the fake recorded it.
      const sent = fake.sessionRequests().find((r) => r.form.client_reference_id === h.id)!;
      expect(sent.request.headers.authorization).toBe('Bearer sk_test_kiln_e2e');
      expect(sent.request.headers['idempotency-key']).toMatch(/^kiln-checkout-/);
      expect(sent.form).toMatchObject({
        mode: 'payment',
        client_reference_id: h.id,
        line_items: [{ quantity: '1', price_data: { currency: 'usd', unit_amount: '1250', product_data: { name: '1,000 credits' } } }],
        metadata: { kiln_account_id: h.id, kiln_pack_id: packId, kiln_credits: '1000' },
        payment_intent_data: { metadata: { kiln_account_id: h.id, kiln_pack_id: packId, kiln_credits: '1000' } },
        success_url: 'http://kiln.test/app/credits?checkout=success&session_id={CHECKOUT_SESSION_ID}',
        cancel_url: 'http://kiln.test/app/credits?checkout=cancelled',
      });
      // Nothing is credited before Stripe says the session is paid.
      await expectConsistent(h.id, 0);

      fake.pay(sessionId);
      const completed = fake.sessionEvent('checkout.session.completed', sessionId);
      const first = await deliver(completed).expect(200);
      expect(first.body).toMatchObject({ received: true, type: 'checkout.session.completed', outcome: 'credited' });
      await expectConsistent(h.id, 1000);
      // Stripe's retry of the same event, and the session's other paid event: nothing more.
      expect((await deliver(completed).expect(200)).body.outcome).toBe('already_credited');
      expect((await deliver(fake.sessionEvent('checkout.session.async_payment_succeeded', sessionId)).expect(200)).body.outcome).toBe(
        'already_credited',
      );
      await expectConsistent(h.id, 1000);

      const entries = await t.http.get('/v1/dashboard/ledger').set('Authorization', `Bearer ${h.token}`).expect(200);
      expect(entries.body.entries).toHaveLength(1);
      expect(entries.body.entries[0]).toMatchObject({ kind: 'purchase', amount: 1000, balanceAfter: 1000 });
      expect(entries.body.entries[0].reason).toContain(sessionId);
      expect(entries.body.entries[0].reason).toContain('12.50 USD');
    });

    it("with the web app's cookie session, checkout needs X-Kiln-Session (CSRF): without it 400 and Stripe is not called", async () => {
      const packId = await pack({ credits: 20, priceCents: 200 });
      const email = `cookie-${randomUUID()}@example.test`;
      await t.admin('post', '/v1/admin/accounts').send({ email, password: PASSWORD, plan: 'studio' }).expect(201);
      const login = await t.http
        .post('/v1/dashboard/login')
        .set('X-Kiln-Session', 'cookie')
        .send({ email, password: PASSWORD })
        .expect(200);
      const cookie = String(login.headers['set-cookie']).split(';')[0];
      const sent = fake.sessionRequests().length;
      const refused = await t.http.post('/v1/dashboard/checkout').set('Cookie', cookie).send({ packId });
      expect(refused.status).toBe(400);
      expect(fake.sessionRequests().length).toBe(sent);
      await t.http.post('/v1/dashboard/checkout').set('Cookie', cookie).set('X-Kiln-Session', 'cookie').send({ packId }).expect(200);
      expect(fake.sessionRequests().length).toBe(sent + 1);
    });

    it('the same completed event delivered 10 times at once credits once', async () => {
      const packId = await pack({ credits: 700, priceCents: 700 });
      const h = await holder(5);
      const sessionId = await checkout(h, packId);
      fake.pay(sessionId);
      const payload = fake.sessionEvent('checkout.session.completed', sessionId);
      const signature = fake.sign(payload, SECRET);
      const answers = await Promise.all(Array.from({ length: 10 }, () => deliver(payload, signature)));
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
      expect(answers.filter((a) => a.body.outcome === 'credited')).toHaveLength(1);
      expect(answers.filter((a) => a.body.outcome === 'already_credited')).toHaveLength(9);
      expect(await ledger(h.id, 'purchase')).toHaveLength(1);
      await expectConsistent(h.id, 705);
      const [{ n }] = await t.db.query(`SELECT count(*)::int AS n FROM credit_purchases WHERE checkout_session_id = $1`, [sessionId]);
      expect(n).toBe(1);
    });

    it('a delayed payment: completed (unpaid) credits nothing, async_payment_succeeded credits, and the unpaid snapshot arriving late changes nothing', async () => {
      const packId = await pack({ credits: 300, priceCents: 900 });
      const h = await holder(0);
      const sessionId = await checkout(h, packId);
      fake.pay(sessionId, false);
      const unpaid = fake.sessionEvent('checkout.session.completed', sessionId);
      expect((await deliver(unpaid).expect(200)).body.outcome).toBe('awaiting_payment');
      await expectConsistent(h.id, 0);
      fake.pay(sessionId);
      expect((await deliver(fake.sessionEvent('checkout.session.async_payment_succeeded', sessionId)).expect(200)).body.outcome).toBe(
        'credited',
      );
      await expectConsistent(h.id, 300);
      // Stripe does not promise order: the unpaid completed event again, after the success.
      expect((await deliver(unpaid).expect(200)).body.outcome).toBe('awaiting_payment');
      await expectConsistent(h.id, 300);
    });

    it('async_payment_succeeded before completed: credited once, whichever comes first', async () => {
      const packId = await pack({ credits: 400, priceCents: 400 });
      const h = await holder(0);
      const sessionId = await checkout(h, packId);
      fake.pay(sessionId);
      expect((await deliver(fake.sessionEvent('checkout.session.async_payment_succeeded', sessionId)).expect(200)).body.outcome).toBe(
        'credited',
      );
      expect((await deliver(fake.sessionEvent('checkout.session.completed', sessionId)).expect(200)).body.outcome).toBe('already_credited');
      await expectConsistent(h.id, 400);
    });

    it('forged, tampered, stale or unsigned events -> 400 and nothing changes', async () => {
      const packId = await pack({ credits: 900, priceCents: 900 });
      const h = await holder(0);
      const sessionId = await checkout(h, packId);
      fake.pay(sessionId);
      const payload = fake.sessionEvent('checkout.session.completed', sessionId);
      const tampered = payload.replace('"kiln_credits":"900"', '"kiln_credits":"900000"');
      expect(tampered).not.toBe(payload);
      const attempts = [
        deliver(payload, fake.sign(payload, 'whsec_someone_else')),
        deliver(tampered, fake.sign(payload, SECRET)),
        deliver(payload, fake.sign(payload, SECRET, Math.floor(Date.now() / 1000) - 600)),
        deliver(payload, 't=1,v1=deadbeef'),
        t.http.post('/v1/stripe/webhook').set('Content-Type', 'application/json').send(payload),
      ];
      for (const res of await Promise.all(attempts)) {
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe('invalid_request');
        expect(res.body.error.details.field).toBe('stripe-signature');
      }
      await expectConsistent(h.id, 0);
      const [{ n }] = await t.db.query(`SELECT count(*)::int AS n FROM credit_purchases WHERE checkout_session_id = $1`, [sessionId]);
      expect(n).toBe(0);
      // The genuine event still credits.
      expect((await deliver(payload).expect(200)).body.outcome).toBe('credited');
      await expectConsistent(h.id, 900);
    });

    it('a body over the size limit -> 400 too_large; an event Kiln does not handle -> 200, ignored', async () => {
      const big = JSON.stringify({ id: 'evt_big', object: 'event', type: 'x', data: { object: { pad: 'x'.repeat(1024 * 1024) } } });
      const tooLarge = await deliver(big);
      expect(tooLarge.status).toBe(400);
      expect(tooLarge.body.error.details).toMatchObject({ field: 'body', reason: 'too_large' });
      const other = await deliver(fake.event('customer.created', { id: 'cus_1', object: 'customer' })).expect(200);
      expect(other.body.outcome).toBe('ignored');
      // A session Kiln did not create (another product on the same Stripe account).
      const foreign = fake.event('checkout.session.completed', {
        id: 'cs_test_foreign',
        object: 'checkout.session',
        mode: 'payment',
        payment_status: 'paid',
        metadata: {},
      });
      expect((await deliver(foreign).expect(200)).body.outcome).toBe('not_kiln');
    });

    it('Stripe failing or not answering -> 503 service_unavailable with Retry-After, nothing recorded', async () => {
      const packId = await pack({ credits: 10, priceCents: 100 });
      const h = await holder(0);
      const before = fake.sessions.size;
      fake.answerNext({ status: 500, body: JSON.stringify({ error: { type: 'api_error', message: 'boom' } }) }, 'hang');
      const res = await t.http.post('/v1/dashboard/checkout').set('Authorization', `Bearer ${h.token}`).send({ packId });
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('service_unavailable');
      expect(res.headers['retry-after']).toBeDefined();
      expect(fake.sessions.size).toBe(before);
    });
  });

  describe('refunds', () => {
    it('a refund after the credits were spent takes the refunded share back, once per refunded amount; the balance goes below zero and batches are refused with 402', async () => {
      const packId = await pack({ credits: 1000, priceCents: 2000 });
      const h = await holder(0);
      const sessionId = await checkout(h, packId);
      fake.pay(sessionId);
      await deliver(fake.sessionEvent('checkout.session.completed', sessionId)).expect(200);
      // Spend 900 of the 1000.
      const billing = t.app.get(BillingService);
      const [{ id: keyId }] = await t.db.query(`SELECT id FROM api_keys WHERE account_id = $1`, [h.id]);
      await t.db.transaction((m) => billing.chargeBatch(m, { accountId: h.id, batchId: randomUUID(), apiKeyId: keyId, amount: 900 }));
      await expectConsistent(h.id, 100);

      // A partial refund of 5.00 of 20.00: a quarter of the credits.
      const quarter = fake.refundEvent(sessionId, 500);
      expect((await deliver(quarter).expect(200)).body.outcome).toBe('refund_taken');
      await expectConsistent(h.id, -150);
      expect((await deliver(quarter).expect(200)).body.outcome).toBe('refund_already_taken');
      // The rest refunded: Stripe's amount_refunded is the running total (20.00).
      const full = fake.refundEvent(sessionId, 2000);
      expect((await deliver(full).expect(200)).body.outcome).toBe('refund_taken');
      await expectConsistent(h.id, -900);
      // Replays, and the older event arriving last, change nothing.
      const late = await Promise.all([deliver(full), deliver(full), deliver(quarter)]);
      expect(late.map((r) => r.body.outcome)).toEqual(['refund_already_taken', 'refund_already_taken', 'refund_already_taken']);
      await expectConsistent(h.id, -900);
      expect((await ledger(h.id, 'purchase_refund')).map((e) => e.amount)).toEqual([-250, -750]);

      const entries = await t.http.get('/v1/dashboard/ledger').set('Authorization', `Bearer ${h.token}`).expect(200);
      expect(entries.body.entries[0]).toMatchObject({ kind: 'purchase_refund', amount: -750, balanceAfter: -900 });

      // Below zero: every batch is refused, with the balance in the details.
      const batch = await t.http
        .post('/v1/batches')
        .set('Authorization', `Bearer ${h.key}`)
        .send({ model: 'eta-image', prompts: ['a fox'] });
      expect(batch.status).toBe(402);
      expect(batch.body.error).toMatchObject({ code: 'insufficient_credits', details: { required: 1, balance: -900 } });
      // An operator's grant is still taken (it pays the debt down); a downward adjustment is not.
      await t.admin('post', `/v1/admin/accounts/${h.id}/credits`).send({ amount: 100, reason: 'goodwill' }).expect(200);
      expect((await t.admin('post', `/v1/admin/accounts/${h.id}/credits`).send({ amount: -1, reason: 'x' })).status).toBe(400);
      await expectConsistent(h.id, -800);
    });

    it.each([
      ['carrying the PaymentIntent metadata', true],
      ['without metadata (Kiln asks Stripe for its PaymentIntent)', false],
    ])(
      "a refund of Kiln's charge %s before its purchase is recorded -> 503 (Stripe delivers it again), then taken once the purchase is",
      async (_, chargeMetadata) => {
        const packId = await pack({ credits: 600, priceCents: 600 });
        const h = await holder(0);
        const sessionId = await checkout(h, packId);
        fake.pay(sessionId);
        const refund = fake.refundEvent(sessionId, 600, chargeMetadata);
        const early = await deliver(refund);
        expect(early.status).toBe(503);
        expect(early.body.error.code).toBe('service_unavailable');
        expect(early.headers['retry-after']).toBe('60');
        await expectConsistent(h.id, 0);
        await deliver(fake.sessionEvent('checkout.session.completed', sessionId)).expect(200);
        expect((await deliver(refund).expect(200)).body.outcome).toBe('refund_taken');
        await expectConsistent(h.id, 0);
        expect((await ledger(h.id)).map((e) => e.kind)).toEqual(['purchase', 'purchase_refund']);
      },
    );

    it("a refund of a payment that is not Kiln's (another product's, or none of this account's) -> 200, ignored", async () => {
      fake.paymentIntents.set('pi_other_product', { order: '42' });
      for (const paymentIntent of ['pi_other_product', 'pi_unknown_here']) {
        const charge = {
          id: 'ch_other',
          object: 'charge',
          amount: 500,
          amount_refunded: 500,
          currency: 'usd',
          payment_intent: paymentIntent,
          metadata: {},
        };
        expect((await deliver(fake.event('charge.refunded', charge)).expect(200)).body.outcome).toBe('not_kiln');
      }
    });
  });

  describe('without STRIPE_SECRET_KEY', () => {
    it('the pack list, checkout and the webhook answer 404 (payments_disabled) and nothing changes; the operator still manages packs', async () => {
      const packId = await pack({ credits: 50, priceCents: 500 });
      const h = await holder(0, off);
      const requests = fake.requests.length;
      const answers = [
        await off.http.get('/v1/dashboard/credit-packs').set('Authorization', `Bearer ${h.token}`),
        await off.http.post('/v1/dashboard/checkout').set('Authorization', `Bearer ${h.token}`).send({ packId }),
      ];
      const sessionId = await checkout(h, packId); // through the app with selling on, for a real session
      fake.pay(sessionId);
      answers.push(await deliver(fake.sessionEvent('checkout.session.completed', sessionId), undefined, off));
      for (const res of answers) {
        expect(res.status).toBe(404);
        expect(res.body.error).toMatchObject({ code: 'not_found', details: { reason: 'payments_disabled' } });
      }
      expect(fake.requests.length).toBe(requests + 1);
      await expectConsistent(h.id, 0);
      expect((await off.admin('get', '/v1/admin/credit-packs').expect(200)).body.packs.map((p: any) => p.id)).toContain(packId);
    });

    it('the account answer says whether credits are sold, so the web app asks nothing that would 404', async () => {
      const account = (app: TestApp, token: string) =>
        app.http.get('/v1/dashboard/account').set('Authorization', `Bearer ${token}`).expect(200);
      expect((await account(off, (await holder(0, off)).token)).body.purchasesEnabled).toBe(false);
      expect((await account(t, (await holder(0)).token)).body.purchasesEnabled).toBe(true);
    });
  });
});
