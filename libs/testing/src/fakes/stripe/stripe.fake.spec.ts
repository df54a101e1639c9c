import { createServer, IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { STRIPE_MAX_NETWORK_RETRIES, stripeClient } from '@app/payments';
import { parseStripeForm, StripeFake } from './stripe.fake';

/**
 * The fake against the official SDK (the client Kiln builds, stripeClient): what the SDK
 * really sends is what the fake reads, and what the fake answers the SDK parses. If an SDK
 * release changes the wire shape, this fails first.
 */
describe('StripeFake against the stripe SDK', () => {
  const fake = new StripeFake();
  let stripe: Stripe;
  beforeAll(async () => {
    await fake.start();
    const base = new URL(fake.apiBase);
    stripe = stripeClient({
      secretKey: 'sk_test_shapes',
      webhookSecret: 'whsec_shapes',
      apiBase: { protocol: 'http', host: base.hostname, port: Number(base.port) },
      timeoutMs: 300,
      returnUrlBase: 'http://kiln.test/app/credits',
    });
  });
  afterAll(() => fake.stop());

  it("checkout.sessions.create: a form-encoded POST with Stripe's headers, nested params intact; the answer is a Session", async () => {
    const session = await stripe.checkout.sessions.create(
      {
        mode: 'payment',
        client_reference_id: '0d4c7c4e-2f55-4a8e-9d0e-0b6a3c1f2e11',
        line_items: [{ quantity: 1, price_data: { currency: 'usd', unit_amount: 1250, product_data: { name: '1,000 credits' } } }],
        metadata: { kiln_credits: '1000' },
        success_url: 'http://kiln.test/app/credits?session_id={CHECKOUT_SESSION_ID}',
      },
      { idempotencyKey: 'shape-key-1' },
    );
    const [{ request, form }] = fake.sessionRequests();
    expect(request.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(request.headers.authorization).toBe('Bearer sk_test_shapes');
    expect(request.headers['idempotency-key']).toBe('shape-key-1');
    expect(request.headers['stripe-version']).toMatch(/^\d{4}-\d{2}-\d{2}\./);
    expect(request.body.toString()).toContain('line_items[0][price_data][unit_amount]=1250');
    expect(form).toEqual({
      mode: 'payment',
      client_reference_id: '0d4c7c4e-2f55-4a8e-9d0e-0b6a3c1f2e11',
      line_items: [{ quantity: '1', price_data: { currency: 'usd', unit_amount: '1250', product_data: { name: '1,000 credits' } } }],
      metadata: { kiln_credits: '1000' },
      success_url: 'http://kiln.test/app/credits?session_id={CHECKOUT_SESSION_ID}',
    });
    expect(session).toMatchObject({ object: 'checkout.session', amount_total: 1250, currency: 'usd', payment_status: 'unpaid' });
    expect(session.id).toMatch(/^cs_test_/);
    expect(session.url).toBe(`${fake.originUrl}/c/pay/${session.id}`);
  });

  it("a refusal comes back as the SDK's StripeInvalidRequestError", async () => {
    await expect(stripe.checkout.sessions.create({ mode: 'payment', success_url: 'http://kiln.test/app/' })).rejects.toMatchObject({
      type: 'StripeInvalidRequestError',
      param: 'line_items',
    });
  });

  it('a call that gets no answer times out, retried once (the same idempotency key), then fails', async () => {
    const before = fake.requests.length;
    fake.answerNext('hang', 'hang');
    await expect(
      stripe.checkout.sessions.create({
        mode: 'payment',
        line_items: [{ quantity: 1, price_data: { currency: 'usd', unit_amount: 100, product_data: { name: 'x' } } }],
        success_url: 'http://kiln.test/app/',
      }),
    ).rejects.toMatchObject({ type: 'StripeConnectionError' });
    const sent = fake.requests.slice(before);
    expect(sent).toHaveLength(1 + STRIPE_MAX_NETWORK_RETRIES);
    expect(new Set(sent.map((r) => r.headers['idempotency-key'])).size).toBe(1);
  });

  it("events the fake signs verify with the SDK's constructEvent; a changed byte does not", () => {
    const payload = fake.event('checkout.session.completed', { id: 'cs_test_x', object: 'checkout.session' });
    const header = fake.sign(payload, 'whsec_shapes');
    expect(stripe.webhooks.constructEvent(payload, header, 'whsec_shapes').type).toBe('checkout.session.completed');
    expect(() => stripe.webhooks.constructEvent(payload.replace('cs_test_x', 'cs_test_y'), header, 'whsec_shapes')).toThrow(
      Stripe.errors.StripeSignatureVerificationError,
    );
  });

  it('parseStripeForm reads bracketed keys into objects and arrays', () => {
    expect(parseStripeForm('a[0][b]=1&a[1][b]=2&m[k]=v&x=%7BY%7D')).toEqual({ a: [{ b: '1' }, { b: '2' }], m: { k: 'v' }, x: '{Y}' });
  });

  describe('the hosted Checkout page', () => {
    const received: { headers: IncomingHttpHeaders; body: string }[] = [];
    let answer = 200;
    const endpoint = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(answer).end();
      });
    });
    beforeAll(async () => {
      await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
      fake.deliverTo = { url: `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/v1/stripe/webhook`, secret: 'whsec_shapes' };
    });
    afterAll(async () => {
      fake.deliverTo = null;
      await new Promise((resolve) => endpoint.close(resolve));
    });

    const open = (name = '1,000 <credits>', amount = 1250) =>
      stripe.checkout.sessions.create({
        mode: 'payment',
        line_items: [{ quantity: 1, price_data: { currency: 'usd', unit_amount: amount, product_data: { name } } }],
        success_url: 'http://kiln.test/app/credits?checkout=success&session_id={CHECKOUT_SESSION_ID}',
        cancel_url: 'http://kiln.test/app/credits?checkout=cancelled',
      });

    it('GET shows the amount, the item (escaped), Pay posting back and Back to cancel_url, without an API key', async () => {
      const session = await open();
      const res = await fetch(session.url!);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await res.text();
      expect(html).toContain('$12.50');
      expect(html).toContain('1,000 &lt;credits&gt;');
      expect(html).toContain(`<form method="post" action="/c/pay/${session.id}"><button type="submit">Pay</button></form>`);
      expect(html).toContain('<a href="http://kiln.test/app/credits?checkout=cancelled">Back</a>');
    });

    it('POST pays, delivers the signed checkout.session.completed and sends the buyer to success_url; then the page is gone', async () => {
      const session = await open();
      const res = await fetch(session.url!, { method: 'POST', redirect: 'manual' });
      expect(res.status).toBe(303);
      expect(res.headers.get('location')).toBe(`http://kiln.test/app/credits?checkout=success&session_id=${session.id}`);
      const hook = received.at(-1)!;
      expect(hook.headers['content-type']).toBe('application/json');
      const event = stripe.webhooks.constructEvent(hook.body, String(hook.headers['stripe-signature']), 'whsec_shapes');
      expect(event.type).toBe('checkout.session.completed');
      expect(event.data.object).toMatchObject({ id: session.id, payment_status: 'paid', status: 'complete', amount_total: 1250 });
      expect(event.data.object).not.toHaveProperty('product_names');
      expect(fake.deliveries.at(-1)).toEqual({ sessionId: session.id, type: 'checkout.session.completed', status: 200 });

      expect((await fetch(session.url!)).status).toBe(410);
      expect((await fetch(session.url!, { method: 'POST', redirect: 'manual' })).status).toBe(410);
      expect(received.filter((r) => r.body.includes(session.id))).toHaveLength(1);
    });

    it("records the endpoint's refusal and still sends the buyer back; an unknown session is 404", async () => {
      answer = 400;
      const session = await open();
      expect((await fetch(session.url!, { method: 'POST', redirect: 'manual' })).status).toBe(303);
      expect(fake.deliveries.at(-1)).toMatchObject({ sessionId: session.id, status: 400 });
      answer = 200;
      expect((await fetch(`${fake.originUrl}/c/pay/cs_test_nothing`)).status).toBe(404);
    });
  });
});
