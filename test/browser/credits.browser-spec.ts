import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { StripeFake } from '@app/testing';
import { LiveKiln, startLiveKiln } from '../helpers/live-kiln';
import {
  DESKTOP,
  horizontalOverflow,
  launch,
  offScreenElements,
  PHONE,
  requireBuiltApp,
  screenshot,
  seriousA11yViolations,
  WatchedPage,
} from './browser';

/*
 * Buying credits (docs/billing.md) in Debian's Chromium: a live Kiln whose Stripe SDK talks
 * to the Stripe fake, whose hosted Checkout page the buyer clicks through; Pay there sends
 * Kiln the signed checkout.session.completed, as Stripe would, before sending the buyer back.
 */
const PASSWORD = 'a long browser passphrase';
const WEBHOOK_SECRET = 'whsec_kiln_browser';
const PACK = { name: 'Starter pack', credits: 1000, priceCents: 1250, currency: 'USD' };

describe('buying credits in Chromium through the Checkout page', () => {
  const fake = new StripeFake();
  let kiln: LiveKiln;
  let browser: Browser;
  let w: WatchedPage;
  let page: Page;
  const email = `buyer-${randomUUID().slice(0, 8)}@example.test`;
  let accountId = '';

  beforeAll(async () => {
    requireBuiltApp();
    await fake.start();
    const base = new URL(fake.apiBase);
    kiln = await startLiveKiln('credits_browser', {
      stripe: {
        secretKey: 'sk_test_kiln_browser',
        webhookSecret: WEBHOOK_SECRET,
        apiBase: { protocol: 'http', host: base.hostname, port: Number(base.port) },
        timeoutMs: 2000,
        returnUrlBase: '', // startLiveKiln points it at the live Kiln
      },
    });
    fake.deliverTo = { url: `${kiln.url}/v1/stripe/webhook`, secret: WEBHOOK_SECRET };
    await kiln.api.admin('post', '/v1/admin/credit-packs').send(PACK).expect(201);
    const created = await kiln.api
      .admin('post', '/v1/admin/accounts')
      .send({ email, password: PASSWORD, plan: 'studio', credits: 200 })
      .expect(201);
    accountId = created.body.account.id;
    browser = await launch();
    w = await WatchedPage.open(browser, DESKTOP);
    page = w.page;
  });
  afterAll(async () => {
    await browser?.close();
    await kiln?.close();
    await fake.stop();
  });

  const noConsoleErrors = (watched: WatchedPage = w) => expect(watched.errors).toEqual([]);
  const balance = (p: Page = page) => p.getByTestId('header-balance');
  const purchaseRows = (p: Page = page) => p.getByRole('row').filter({ hasText: 'Checkout Session cs_test_' });

  async function signIn(v: WatchedPage, base = kiln.url) {
    const p = v.page;
    v.expectFailedLoads.add(401); // the sign-in page's visit is signed out
    await p.goto(`${base}/app/signin`);
    await p.getByLabel('Email').fill(email);
    await p.getByLabel('Password').fill(PASSWORD);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    v.expectFailedLoads.delete(401);
  }

  /** The account's purchase rows, through the dashboard's ledger API, and balance == ledger sum. */
  async function purchasesInLedger(): Promise<Array<{ amount: number; reason: string }>> {
    const login = await kiln.api.http.post('/v1/dashboard/login').send({ email, password: PASSWORD }).expect(200);
    const res = await kiln.api.http.get('/v1/dashboard/ledger?limit=100').set('Authorization', `Bearer ${login.body.token}`).expect(200);
    expect(await kiln.api.ledgerSum(accountId)).toBe(await kiln.api.balance(accountId));
    return (res.body.entries as Array<{ kind: string; amount: number; reason: string }>).filter((e) => e.kind === 'purchase');
  }

  /** From the credits page: Buy on the pack, onto the fake's Checkout page. */
  async function openCheckout(): Promise<string> {
    await page.getByRole('heading', { level: 1, name: 'Buy credits' }).waitFor();
    await page.getByTestId('credit-packs').getByRole('button', { name: 'Buy' }).click();
    await page.waitForURL(`${fake.originUrl}/c/pay/**`);
    await page.getByRole('heading', { level: 1, name: PACK.name }).waitFor();
    expect(await page.getByTestId('amount').textContent()).toBe('$12.50');
    return page.url().split('/').pop()!;
  }

  it('signs in, opens Buy credits, pays on the Checkout page and comes back to the purchase; the balance grows by the pack', async () => {
    await signIn(w);
    expect(await balance().textContent()).toBe('200 credits');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Buy credits' }).click();
    await page.getByText('No purchases yet.').waitFor();
    const sessionId = await openCheckout();
    await screenshot(page, 'checkout-fake');
    await page.getByRole('button', { name: 'Pay' }).click();

    await page.waitForURL(`${kiln.url}/app/credits?checkout=success&session_id=${sessionId}`);
    expect(fake.deliveries).toEqual([{ sessionId, type: 'checkout.session.completed', status: 200 }]);
    await page.getByText('1,000 credits added.').waitFor();
    await purchaseRows().filter({ hasText: sessionId }).waitFor();
    await page.getByText('1,200 credits', { exact: true }).first().waitFor();
    expect(await balance().textContent()).toBe('1,200 credits');
    await screenshot(page, 'credits-desktop', { docs: true, fullPage: true });

    const purchases = await purchasesInLedger();
    expect(purchases).toEqual([expect.objectContaining({ amount: 1000, reason: expect.stringContaining(sessionId) })]);
    expect(await kiln.api.balance(accountId)).toBe(1200);
    noConsoleErrors();
  });

  it('Back on the Checkout page returns with "nothing was charged" and no ledger row', async () => {
    await page.goto(`${kiln.url}/app/credits`);
    const sessionId = await openCheckout();
    await page.getByRole('link', { name: 'Back' }).click();
    await page.waitForURL(`${kiln.url}/app/credits?checkout=cancelled`);
    await page.getByText('Checkout cancelled: nothing was charged.').waitFor();
    expect(fake.sessions.get(sessionId)).toMatchObject({ status: 'open', payment_status: 'unpaid' });
    expect(await purchasesInLedger()).toHaveLength(1);
    expect(await balance().textContent()).toBe('1,200 credits');
    noConsoleErrors();
  });

  it('a payment Stripe reports after the buyer is back: the page waits, then shows it in its balance and table', async () => {
    fake.deliverTo = null; // Pay sends no event; the test sends it once the buyer is back
    try {
      await page.goto(`${kiln.url}/app/credits`);
      const sessionId = await openCheckout();
      await page.getByRole('button', { name: 'Pay' }).click();
      await page.waitForURL(`${kiln.url}/app/credits?checkout=success&session_id=${sessionId}`);
      await page.getByText('Payment received. Waiting for the credits…').waitFor();
      await purchaseRows().first().waitFor(); // the table has loaded, without this purchase
      expect(await purchaseRows().count()).toBe(1);

      const payload = fake.sessionEvent('checkout.session.completed', sessionId);
      const delivered = await fetch(`${kiln.url}/v1/stripe/webhook`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': fake.sign(payload, WEBHOOK_SECRET) },
        body: payload,
      });
      expect(delivered.status).toBe(200);

      await page.getByText('1,000 credits added.').waitFor();
      await purchaseRows().filter({ hasText: sessionId }).waitFor();
      expect(await purchaseRows().count()).toBe(2);
      await page.getByText('2,200 credits', { exact: true }).first().waitFor();
      expect(await purchasesInLedger()).toHaveLength(2);
      noConsoleErrors();
    } finally {
      fake.deliverTo = { url: `${kiln.url}/v1/stripe/webhook`, secret: WEBHOOK_SECRET };
    }
  });

  it('at phone size the credits page fits and has no serious accessibility violations', async () => {
    const phone = await WatchedPage.open(browser, PHONE);
    try {
      await signIn(phone);
      await phone.page.goto(`${kiln.url}/app/credits`);
      await purchaseRows(phone.page).first().waitFor();
      await screenshot(phone.page, 'credits-phone', { docs: true, fullPage: true });
      expect(await horizontalOverflow(phone.page)).toBeLessThanOrEqual(0);
      expect(await offScreenElements(phone.page)).toEqual([]);
      expect(await seriousA11yViolations(phone.page)).toEqual([]);
      noConsoleErrors(phone);
    } finally {
      await phone.close();
    }
  });

  it('a Kiln that does not sell credits shows no "Buy credits" in its navigation', async () => {
    const off = await startLiveKiln('credits_browser_off', { stripe: null });
    const v = await WatchedPage.open(browser, DESKTOP);
    try {
      await off.api.admin('post', '/v1/admin/accounts').send({ email, password: PASSWORD, plan: 'studio' }).expect(201);
      await signIn(v, off.url);
      const nav = v.page.getByRole('navigation', { name: 'Main' });
      await nav.getByRole('link', { name: 'Overview' }).waitFor();
      expect(await nav.getByRole('link', { name: 'Buy credits' }).count()).toBe(0);
      noConsoleErrors(v);
    } finally {
      await v.close();
      await off.close();
    }
  });
});
