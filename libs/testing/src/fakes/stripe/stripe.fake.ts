import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import { CapturedRequest, FakeAnswer, FakeHttpUpstream, json } from '../fake-upstream';

/*
 * The part of Stripe's API Kiln calls, on 127.0.0.1, shaped from what the official SDK
 * sends (stripe.fake.spec.ts captures the SDK's own request against this fake): the SDK
 * posts application/x-www-form-urlencoded bodies with bracketed keys
 * (line_items[0][price_data][currency]=usd), a Bearer secret key, an Idempotency-Key and a
 * Stripe-Version; Stripe answers the object as JSON, or `{error: {type, message, param}}`.
 * Also builds the events Stripe would send for the sessions it made, signed with the SDK's
 * own test-header helper. Test code only.
 */

type Form = Record<string, unknown>;

/** Stripe's form encoding back into objects and arrays (`a[0][b]=c` -> {a: [{b: 'c'}]}). */
export function parseStripeForm(body: string): Form {
  const root: Form = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const path = key.replace(/\]/g, '').split('[');
    let node: Record<string, unknown> = root;
    path.forEach((part, i) => {
      if (i === path.length - 1) {
        node[part] = value;
        return;
      }
      const nextIsIndex = /^\d+$/.test(path[i + 1]);
      node[part] ??= nextIsIndex ? [] : {};
      node = node[part] as Record<string, unknown>;
    });
  }
  return root;
}

export interface FakeSession {
  id: string;
  object: 'checkout.session';
  mode: string;
  status: 'open' | 'complete';
  payment_status: 'unpaid' | 'paid';
  client_reference_id: string | null;
  customer_email: string | null;
  metadata: Record<string, string>;
  amount_total: number;
  amount_subtotal: number;
  currency: string;
  payment_intent: string | null;
  success_url: string;
  cancel_url: string | null;
  url: string | null;
  livemode: false;
  created: number;
  /** Not Stripe's: the PaymentIntent metadata the session was created with (copied onto its charge). */
  payment_intent_metadata: Record<string, string>;
  /** Not Stripe's: the line items' product names (the Checkout page shows them). */
  product_names: string[];
}

/** Where the Checkout page's Pay sends checkout.session.completed, as a Stripe webhook endpoint would get it. */
export interface FakeWebhookEndpoint {
  url: string;
  secret: string;
}

/** One event the Checkout page sent: Kiln's status, or 0 when it did not answer. */
export interface FakeDelivery {
  sessionId: string;
  type: string;
  status: number;
}

const DELIVERY_TIMEOUT_MS = 10_000;

const stripeError = (status: number, message: string, param?: string): FakeAnswer =>
  json(status, { error: { type: 'invalid_request_error', message, ...(param ? { param } : {}) } }, { 'request-id': requestId() });
const requestId = () => `req_${randomBytes(7).toString('hex')}`;
const idOf = (prefix: string) => `${prefix}_test_${randomBytes(12).toString('hex')}`;

export class StripeFake extends FakeHttpUpstream {
  /** Every session created, by id. */
  readonly sessions = new Map<string, FakeSession>();
  /** PaymentIntents (id -> metadata): a paid session's, and any a test adds (another product's payment). */
  readonly paymentIntents = new Map<string, Record<string, string>>();
  private readonly stripe = new Stripe('sk_test_fake_signer');
  /** Set by a test for the hosted Checkout page (below) to deliver its events; unset, Pay sends none. */
  deliverTo: FakeWebhookEndpoint | null = null;
  /** The events Pay delivered, in order. */
  readonly deliveries: FakeDelivery[] = [];

  /** STRIPE_API_BASE for Kiln (the SDK's host, port and protocol). */
  get apiBase(): string {
    return this.originUrl;
  }

  /** The session-creating requests the SDK sent, their form bodies decoded. */
  sessionRequests(): { request: CapturedRequest; form: Form }[] {
    return this.requests
      .filter((r) => r.method === 'POST' && r.path === '/v1/checkout/sessions')
      .map((request) => ({ request, form: parseStripeForm(request.body.toString('utf8')) }));
  }

  protected defaultAnswer(req: CapturedRequest): FakeAnswer | Promise<FakeAnswer> {
    // The hosted Checkout page is the buyer's, in a browser: no API key.
    const page = /^\/c\/pay\/([^/?]+)$/.exec(req.path);
    if (page) return this.checkoutPage(req.method, decodeURIComponent(page[1]));
    if (!/^Bearer sk_(test|live)_\S+$/.test(String(req.headers.authorization ?? ''))) {
      return json(401, { error: { type: 'invalid_request_error', message: 'Invalid API Key provided' } });
    }
    if (req.method === 'POST' && req.path === '/v1/checkout/sessions') return this.createSession(req);
    const intent = /^\/v1\/payment_intents\/([^/?]+)$/.exec(req.path);
    if (req.method === 'GET' && intent) {
      const id = decodeURIComponent(intent[1]);
      const metadata = this.paymentIntents.get(id);
      if (!metadata) return stripeError(404, `No such payment_intent: '${id}'`, 'intent');
      return json(200, { id, object: 'payment_intent', status: 'succeeded', metadata, livemode: false });
    }
    const get = /^\/v1\/checkout\/sessions\/([^/?]+)$/.exec(req.path);
    if (req.method === 'GET' && get) {
      const s = this.sessions.get(decodeURIComponent(get[1]));
      return s ? json(200, this.wire(s)) : stripeError(404, `No such checkout.session: '${get[1]}'`, 'session');
    }
    return stripeError(404, `Unrecognized request URL (${req.method}: ${req.path})`);
  }

  private createSession(req: CapturedRequest): FakeAnswer {
    if (!String(req.headers['content-type']).startsWith('application/x-www-form-urlencoded')) {
      return stripeError(400, 'Invalid request: the body must be form-encoded');
    }
    const form = parseStripeForm(req.body.toString('utf8'));
    if (form.mode !== 'payment' && form.mode !== 'subscription' && form.mode !== 'setup')
      return stripeError(400, 'Missing required param: mode.', 'mode');
    if (typeof form.success_url !== 'string') return stripeError(400, 'Missing required param: success_url.', 'success_url');
    const items = form.line_items as Array<{
      quantity?: string;
      price_data?: { currency?: string; unit_amount?: string; product_data?: { name?: string } };
    }>;
    if (!Array.isArray(items) || items.length === 0) return stripeError(400, 'Missing required param: line_items.', 'line_items');
    let total = 0;
    let currency = '';
    for (const [i, item] of items.entries()) {
      const p = item.price_data;
      const unit = Number(p?.unit_amount);
      if (!p?.currency || !/^[a-z]{3}$/.test(p.currency))
        return stripeError(400, 'Invalid currency', `line_items[${i}][price_data][currency]`);
      if (!Number.isInteger(unit) || unit < 0) return stripeError(400, 'Invalid integer', `line_items[${i}][price_data][unit_amount]`);
      if (!p.product_data?.name) return stripeError(400, 'Missing required param', `line_items[${i}][price_data][product_data][name]`);
      total += unit * Number(item.quantity ?? 1);
      currency = p.currency;
    }
    const id = idOf('cs');
    const session: FakeSession = {
      id,
      object: 'checkout.session',
      mode: form.mode,
      status: 'open',
      payment_status: 'unpaid',
      client_reference_id: (form.client_reference_id as string) ?? null,
      customer_email: (form.customer_email as string) ?? null,
      metadata: (form.metadata as Record<string, string>) ?? {},
      amount_total: total,
      amount_subtotal: total,
      currency,
      payment_intent: null,
      success_url: form.success_url,
      cancel_url: (form.cancel_url as string) ?? null,
      url: `${this.originUrl}/c/pay/${id}`,
      livemode: false,
      created: Math.floor(Date.now() / 1000),
      payment_intent_metadata: ((form.payment_intent_data as Form | undefined)?.metadata as Record<string, string>) ?? {},
      product_names: items.map((item) => item.price_data!.product_data!.name!),
    };
    this.sessions.set(id, session);
    return json(200, this.wire(session), { 'request-id': requestId() });
  }

  /**
   * Stripe's hosted Checkout page, minimal: GET shows the amount, the items and a Pay button
   * (a form posting back here) and a Back link to cancel_url; POST pays the session, delivers
   * checkout.session.completed, signed, to `deliverTo`, and sends the buyer to success_url
   * (303), as Stripe does. A session unknown is 404, one no longer open is 410.
   */
  private async checkoutPage(method: string, id: string): Promise<FakeAnswer> {
    const s = this.sessions.get(id);
    if (!s) return plain(404, 'No such Checkout Session.');
    if (s.status !== 'open') return plain(410, 'This Checkout Session is no longer available.');
    if (method === 'GET') return { status: 200, headers: { 'content-type': 'text/html; charset=utf-8' }, body: checkoutHtml(s) };
    if (method !== 'POST') return plain(405, 'Method not allowed.');
    this.pay(id);
    await this.deliver('checkout.session.completed', id);
    return { status: 303, headers: { location: s.success_url.replace('{CHECKOUT_SESSION_ID}', id) }, body: '' };
  }

  private async deliver(type: 'checkout.session.completed', sessionId: string): Promise<void> {
    if (!this.deliverTo) return;
    const payload = this.sessionEvent(type, sessionId);
    const { url, secret } = this.deliverTo;
    let status = 0;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': this.sign(payload, secret) },
        body: payload,
        signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
      });
      status = res.status;
    } catch {
      // No answer: recorded as 0, as Stripe's dashboard shows a failed delivery.
    }
    this.deliveries.push({ sessionId, type, status });
  }

  /** The buyer pays (or, for a delayed method, submits the payment): the session completes with a PaymentIntent. */
  pay(sessionId: string, paid = true): FakeSession {
    const s = this.session(sessionId);
    s.status = 'complete';
    s.payment_status = paid ? 'paid' : 'unpaid';
    s.payment_intent ??= idOf('pi');
    this.paymentIntents.set(s.payment_intent, s.payment_intent_metadata);
    s.url = null;
    return s;
  }

  /** A Stripe event of `type` about a session, as Stripe would send it (the session as it is now). */
  sessionEvent(type: 'checkout.session.completed' | 'checkout.session.async_payment_succeeded', sessionId: string): string {
    return this.event(type, this.wire(this.session(sessionId)));
  }

  /**
   * charge.refunded for a paid session's charge, amountRefunded being the charge's running
   * total. The charge carries its PaymentIntent's metadata unless `chargeMetadata` is false.
   */
  refundEvent(sessionId: string, amountRefunded: number, chargeMetadata = true): string {
    const s = this.session(sessionId);
    if (!s.payment_intent) throw new Error(`session ${sessionId} is not paid`);
    const charge = {
      id: `ch_${s.payment_intent.slice(3)}`,
      object: 'charge',
      amount: s.amount_total,
      amount_captured: s.amount_total,
      amount_refunded: amountRefunded,
      currency: s.currency,
      payment_intent: s.payment_intent,
      metadata: chargeMetadata ? s.payment_intent_metadata : {},
      paid: true,
      refunded: amountRefunded >= s.amount_total,
      status: 'succeeded',
      livemode: false,
    };
    return this.event('charge.refunded', charge);
  }

  /** Any event payload (JSON text), for events Kiln must ignore. */
  event(type: string, object: unknown): string {
    return JSON.stringify({
      id: idOf('evt'),
      object: 'event',
      api_version: '2026-10-28.endive',
      created: Math.floor(Date.now() / 1000),
      type,
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      data: { object },
    });
  }

  /** The Stripe-Signature header Stripe would send for `payload` (the SDK's own test helper). */
  sign(payload: string, secret: string, timestamp?: number): string {
    return this.stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp });
  }

  private session(id: string): FakeSession {
    const s = this.sessions.get(id);
    if (!s) throw new Error(`the fake made no session ${id}`);
    return s;
  }

  /** The session as Stripe's API writes it (without this fake's bookkeeping). */
  private wire(s: FakeSession): Omit<FakeSession, 'payment_intent_metadata' | 'product_names'> {
    const { payment_intent_metadata: _metadata, product_names: _names, ...rest } = s;
    return rest;
  }
}

const plain = (status: number, text: string): FakeAnswer => ({
  status,
  headers: { 'content-type': 'text/plain; charset=utf-8' },
  body: text,
});

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The amount in the currency's smallest unit as Stripe's page writes it: 1250 usd -> "$12.50", 1000 jpy -> "¥1,000". */
function formatAmount(amount: number, currency: string): string {
  const format = new Intl.NumberFormat('en-US', { style: 'currency', currency: currency.toUpperCase() });
  const digits = format.resolvedOptions().maximumFractionDigits ?? 2;
  return format.format(amount / 10 ** digits);
}

function checkoutHtml(s: FakeSession): string {
  const back = s.cancel_url ? `<p><a href="${escapeHtml(s.cancel_url)}">Back</a></p>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>Checkout (fake Stripe)</title></head>
<body><main>
<h1>${escapeHtml(s.product_names.join(', '))}</h1>
<p data-testid="amount">${escapeHtml(formatAmount(s.amount_total, s.currency))}</p>
<form method="post" action="/c/pay/${encodeURIComponent(s.id)}"><button type="submit">Pay</button></form>
${back}
</main></body></html>`;
}
