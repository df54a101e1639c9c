import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import type { Browser, Page, Request, Response } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { buildConfig } from '@app/config';
import { routeModel, solidPng } from '@app/testing';
import { LiveKiln, startLiveKiln } from '../helpers/live-kiln';
import { WebhookReceiver } from '../helpers/webhook-receiver';
import {
  brokenWords,
  DESKTOP,
  horizontalOverflow,
  offScreenElements,
  launch,
  PHONE,
  requireBuiltApp,
  screenshot,
  seriousA11yViolations,
  Viewport,
  WatchedPage,
} from './browser';

/*
 * The web app (docs/web.md) in Debian's Chromium against a live Kiln (api on a port of
 * 127.0.0.1, a generator consuming its queue, a database of this file's own): what a person
 * does, clicked through. Steps share one account and run in order.
 */
const PASSWORD = 'a long browser passphrase';

/** Polls a page expression until true (page.waitForFunction would eval a string, which the CSP refuses). */
/** The page's batch creations while watched: each POST's body and idempotency key, and the ids of those created (201). */
function watchBatchCreates(page: Page) {
  const sent: Array<{ body: Record<string, unknown>; key: string | undefined }> = [];
  const created: Array<Promise<string>> = [];
  const isCreate = (r: Request) => r.method() === 'POST' && new URL(r.url()).pathname === '/v1/dashboard/batches';
  const onRequest = (r: Request) => {
    if (isCreate(r)) sent.push({ body: r.postDataJSON(), key: r.headers()['idempotency-key'] });
  };
  const onResponse = (r: Response) => {
    if (isCreate(r.request()) && r.status() === 201) created.push(r.json().then((b: { id: string }) => b.id));
  };
  page.on('request', onRequest);
  page.on('response', onResponse);
  const stop = () => {
    page.off('request', onRequest);
    page.off('response', onResponse);
  };
  return { sent, created, stop };
}

async function waitUntil(page: Page, expression: string, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > until) throw new Error(`still false after ${timeoutMs} ms: ${expression}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('the web app in Chromium', () => {
  let kiln: LiveKiln;
  let browser: Browser;
  let receiver: WebhookReceiver;
  let w: WatchedPage;
  let page: Page;
  const email = `web-${randomUUID().slice(0, 8)}@example.test`;
  let accountId = '';
  let firstBatchId = '';
  let failedBatchId = '';

  beforeAll(async () => {
    requireBuiltApp();
    receiver = await new WebhookReceiver().listen();
    const base = buildConfig(process.env);
    kiln = await startLiveKiln('browser', {
      webhooks: { ...base.webhooks, allowPrivate: true, retryDelaysMs: [300, 300, 300], pollIntervalMs: 100 },
    });
    browser = await launch();
    w = await WatchedPage.open(browser, DESKTOP);
    await w.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: kiln.url });
    page = w.page;
  });
  afterAll(async () => {
    await browser?.close();
    await kiln?.close();
    await receiver?.close();
  });

  const app = (path = '') => `${kiln.url}/app/${path}`;
  const heading = (name: string) => page.getByRole('heading', { level: 1, name });
  /** A bearer session for checks behind the page's back. */
  const apiSession = async () => {
    const res = await kiln.api.http.post('/v1/dashboard/login').send({ email, password: PASSWORD }).expect(200);
    return { Authorization: `Bearer ${res.body.token}` };
  };
  const noConsoleErrors = (watched: WatchedPage = w) => expect(watched.errors).toEqual([]);

  async function signIn(p: Page, address = email) {
    await p.goto(`${kiln.url}/app/signin`);
    await p.getByLabel('Email').fill(address);
    await p.getByLabel('Password').fill(PASSWORD);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  }

  it('signs up, signs out and signs in; the session is an HttpOnly cookie the page cannot read', async () => {
    w.expectFailedLoads.add(401); // the first visit is signed out
    await page.goto(kiln.url + '/');
    expect(page.url()).toBe(app());
    await heading('Sign in').waitFor();
    await screenshot(page, 'signin', { docs: true });
    await page.getByRole('link', { name: 'Create an account' }).click();
    await heading('Create your account').waitFor();
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await heading('Overview').waitFor();
    // A new account: free plan, no credits, no API access — each said on the page.
    await page.getByText('No credits.').waitFor();
    // No dead end: this installation sells no credits, so the page names the operator's command.
    await page.getByText(`npm run kiln-admin -- grant ${email} 1000`).waitFor();
    await page.getByText('No API access on the free plan.').waitFor();
    await screenshot(page, 'overview-new-account');

    const cookies = await w.context.cookies();
    const session = cookies.find((c) => c.name === 'kiln_session')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/v1/dashboard' });
    expect(await page.evaluate('document.cookie')).toBe('');
    expect(await page.evaluate('JSON.stringify(localStorage) + JSON.stringify(sessionStorage)')).toBe('{}{}');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You signed out.').waitFor();
    await signIn(page);
    w.expectFailedLoads.delete(401);
    noConsoleErrors();

    const account = await kiln.api.http
      .get('/v1/dashboard/account')
      .set(await apiSession())
      .expect(200);
    accountId = account.body.account.id;
    await kiln.api.admin('patch', `/v1/admin/accounts/${accountId}`).send({ plan: 'studio' }).expect(200);
    await kiln.api.admin('post', `/v1/admin/accounts/${accountId}/credits`).send({ amount: 500, reason: 'browser test' }).expect(200);
  });

  it('creates a key (secret shown once, gone after reload) and revokes it after a confirmation', async () => {
    await page.goto(app('keys'));
    await heading('API keys').waitFor();
    await page.getByLabel('Name').fill('ci');
    await page.getByLabel('Daily credit cap').fill('500');
    await page.getByRole('checkbox', { name: 'webhooks:manage' }).uncheck();
    await page.getByRole('button', { name: 'Create key' }).click();
    const secretBox = page.getByTestId('secret');
    await secretBox.waitFor();
    const secret = await secretBox.inputValue();
    expect(secret).toMatch(/^kiln_live_/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(secret);
    await screenshot(page, 'keys-secret', { docs: true });

    const me = await kiln.api.http.get('/v1/me').set('Authorization', `Bearer ${secret}`).expect(200);
    expect(me.body.key).toMatchObject({ creditCapPerDay: 500, scopes: expect.not.arrayContaining(['webhooks:manage']) });

    await page.reload();
    await heading('API keys').waitFor();
    await page.getByRole('cell', { name: 'ci', exact: true }).waitFor();
    expect(await page.getByTestId('secret').count()).toBe(0);
    expect(await page.content()).not.toContain(secret);

    await page.getByRole('button', { name: 'Revoke ci' }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke this key?' });
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await page.getByText('revoked', { exact: true }).waitFor();
    const refused = await kiln.api.http.get('/v1/me').set('Authorization', `Bearer ${secret}`).expect(401);
    expect(refused.body.error.code).toBe('key_revoked');
    noConsoleErrors();
  });

  it('new batch: only legal ratio x resolution pairs, prompts from .txt and .jsonl files chosen or dropped, references priced by mode', async () => {
    await page.goto(app('batches/new'));
    await heading('New batch').waitFor();
    const resolutions = async () => (await page.getByLabel('Resolution').locator('option').allTextContents()).map((o) => o.split(' ')[0]);
    await page.getByLabel('Model').selectOption('gamma-4-5'); // priced at 2K and 4K only
    expect(await resolutions()).toEqual(['2K', '4K']);
    await page.getByLabel('Aspect ratio').selectOption('21:9'); // not at 4K
    expect(await resolutions()).toEqual(['2K']);

    const promptFiles = page.locator('input[type=file][accept=".txt,.jsonl"]');
    await promptFiles.setInputFiles([
      // As the CLI reads it: lines starting with # are comments.
      { name: 'a.txt', mimeType: 'text/plain', buffer: Buffer.from('# foxes and lighthouses\r\na fox\r\n\na lighthouse\n') },
      { name: 'b.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from('{"prompt":"a bowl of ramen"}\n"a kite"\n') },
    ]);
    // The files are read asynchronously: the estimate for four prompts says they are in.
    await page.getByTestId('estimate').getByText('24 credits').waitFor(); // 4 images x 6
    expect(await page.getByLabel('Prompts, one per line').inputValue()).toBe('a fox\na lighthouse\na bowl of ramen\na kite');
    // Dropped on the prompts card, as from a file manager.
    const dropped = await page.evaluateHandle(`(() => { const dt = new DataTransfer();
      dt.items.add(new File(['a dropped prompt\\n'], 'dropped.txt', { type: 'text/plain' })); return dt; })()`);
    await page.locator('.drop').dispatchEvent('drop', { dataTransfer: dropped });
    await page.getByTestId('estimate').getByText('30 credits').waitFor(); // 5 images x 6
    expect(await page.getByLabel('Prompts, one per line').inputValue()).toBe(
      'a fox\na lighthouse\na bowl of ramen\na kite\na dropped prompt',
    );
    await promptFiles.setInputFiles([{ name: 'bad.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from('{"text":"x"}\n') }]);
    await page.getByRole('alert').getByText('bad.jsonl:1: expected a JSON string or {"prompt": "..."}').waitFor();

    const red = await solidPng(48, 48, { r: 200, g: 30, b: 30 });
    const blue = await solidPng(48, 48, { r: 30, g: 30, b: 200 });
    await page.locator('input[type=file][accept^="image/"]').setInputFiles([
      { name: 'red.png', mimeType: 'image/png', buffer: red },
      { name: 'blue.png', mimeType: 'image/png', buffer: blue },
    ]);
    await page.getByRole('img', { name: 'blue.png' }).waitFor();
    await waitUntil(page, `[...document.querySelectorAll('.refs img')].every((i) => i.naturalWidth === 48)`);
    await page.getByTestId('estimate').getByText('60 credits').waitFor(); // each: 5 prompts x 2 references x 6
    await page.getByLabel('all together in every image').check();
    await page.getByTestId('estimate').getByText('30 credits').waitFor();
    await page.getByRole('button', { name: 'Remove blue.png' }).click();
    expect(await page.locator('.refs img').count()).toBe(1);
    noConsoleErrors();
  });

  it('creates a batch from the form (one batch after a double click) and watches it finish live', async () => {
    await page.goto(app('batches/new'));
    await heading('New batch').waitFor();
    await page.getByLabel('Model').selectOption('eta-image');
    await page.getByLabel('Aspect ratio').selectOption('16:9');
    await page.getByLabel('Prompts, one per line').fill('a red fox in the snow\na lighthouse at dusk');
    await page.getByLabel('Images per prompt').fill('2');
    await page.getByLabel('Note (optional)').fill('Foxes and lighthouses');
    await page.getByTestId('estimate').getByText('4 credits').waitFor();
    await screenshot(page, 'new-batch', { docs: true, fullPage: true });

    const creates: Array<string | undefined> = [];
    const onRequest = (r: import('playwright-core').Request) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/dashboard/batches') creates.push(r.headers()['idempotency-key']);
    };
    page.on('request', onRequest);
    await page.getByRole('button', { name: 'Create batch' }).dblclick();
    await page.waitForURL(/\/app\/batches\/[0-9a-f-]{36}$/);
    page.off('request', onRequest);
    firstBatchId = page.url().split('/').pop()!;
    // However many requests the double click sent, they share one key (the api replays it).
    expect(creates.length).toBeGreaterThanOrEqual(1);
    expect(new Set(creates).size).toBe(1);
    expect(creates[0]).toMatch(/^[0-9a-f-]{36}$/);
    await heading('Foxes and lighthouses').waitFor();
    // Live: the page is never reloaded, the marker set now survives until the batch is done.
    await page.evaluate('window.__kilnMarker = 1');
    await page.getByTestId('progress-text').getByText('4 of 4 images ready. Done.').waitFor({ timeout: 120_000 });
    expect(await page.evaluate('window.__kilnMarker')).toBe(1);
    expect(await page.locator('.tile img').count()).toBe(4);

    const list = await kiln.api.http
      .get('/v1/dashboard/batches')
      .set(await apiSession())
      .expect(200);
    expect(list.body.batches.map((b: { id: string }) => b.id)).toEqual([firstBatchId]);
    await screenshot(page, 'batch', { docs: true });
    noConsoleErrors();
  });

  it('opens an image full size and downloads the zip', async () => {
    await page.getByRole('button', { name: /^Open image 1:/ }).click();
    const viewer = page.getByRole('dialog', { name: 'Image' });
    await viewer.waitFor();
    await waitUntil(page, `document.querySelector('[data-testid=viewer-image]')?.naturalWidth > 0`);
    expect(await page.evaluate(`document.querySelector('[data-testid=viewer-image]').naturalWidth`)).toBe(1360); // 16:9 at 1K
    await page.keyboard.press('ArrowRight');
    await viewer.getByText(/^#2 ·/).waitFor();
    // Its details: prompt, seed, size asked and made, format; copy its URL, download it.
    const details = viewer.getByTestId('image-details');
    const facts = Object.fromEntries(
      await details.locator('dt').evaluateAll((dts) => dts.map((dt) => [dt.textContent, dt.nextElementSibling?.textContent])),
    );
    expect(facts).toEqual({
      Seed: 'drawn from the batch id',
      'Size asked': '16:9 at 1K',
      'Size made': '1360 × 768 px',
      Format: expect.stringMatching(/^(PNG|JPEG|WEBP)$/),
      Model: 'eta-image',
      // From a worker taking the task to its end (the task's startedAt and finishedAt).
      'Time taken': expect.stringMatching(/^(\d+\.\d s|\d+ min \d+ s)$/),
    });
    await details.getByText('a red fox in the snow').waitFor();
    const src = await viewer.getByTestId('viewer-image').evaluate((img) => (img as HTMLImageElement).src);
    await details.getByRole('button', { name: 'Copy URL' }).click();
    await details.getByRole('button', { name: 'URL copied' }).waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(src);
    // From Kiln's own origin, whatever the storage (a bucket's URL would open the image instead).
    expect(await details.getByRole('link', { name: 'Download' }).getAttribute('href')).toMatch(
      /^\/v1\/dashboard\/batches\/[0-9a-f-]{36}\/tasks\/[0-9a-f-]{36}\/file$/,
    );
    const [image] = await Promise.all([page.waitForEvent('download'), details.getByRole('link', { name: 'Download' }).click()]);
    expect(image.suggestedFilename()).toMatch(new RegExp(`^kiln-${firstBatchId}-2\\.(png|jpg|webp)$`));
    expect(readFileSync(await image.path()).length).toBeGreaterThan(100);
    // Scrolled down to its details, the dialog keeps its bar (previous, next, close) in view.
    const bar = await viewer.getByRole('button', { name: 'Previous image' }).boundingBox();
    expect(bar!.y).toBeGreaterThanOrEqual(0);
    await screenshot(page, 'image-viewer', { docs: true });
    await page.keyboard.press('Escape');
    await viewer.waitFor({ state: 'hidden' });

    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download zip' }).click()]);
    expect(download.suggestedFilename()).toBe(`kiln-${firstBatchId}.zip`);
    const zip = readFileSync(await download.path());
    expect(zip.subarray(0, 2).toString('latin1')).toBe('PK');
    expect(zip.includes(Buffer.from('manifest.json'))).toBe(true);
    noConsoleErrors();
  });

  it('cancels a running batch', async () => {
    const restore = await routeModel(kiln.api, 'gamma-5-flash', { type: 'simulated', latencyMs: 1500, maxConcurrency: 1 });
    try {
      await page.goto(app('batches/new'));
      await page.getByLabel('Model').selectOption('gamma-5-flash');
      await page
        .getByLabel('Prompts, one per line')
        .fill(['one', 'two', 'three', 'four', 'five', 'six'].map((p) => `a slow ${p}`).join('\n'));
      await page.getByTestId('estimate').getByText('18 credits').waitFor();
      await page.getByRole('button', { name: 'Create batch' }).click();
      await page.waitForURL(/\/app\/batches\/[0-9a-f-]{36}$/);
      await page
        .getByTestId('progress-text')
        .getByText(/rendering|waiting/)
        .waitFor();
      await page.getByRole('button', { name: 'Cancel batch' }).click();
      const dialog = page.getByRole('dialog', { name: 'Cancel this batch?' });
      await dialog.getByRole('button', { name: 'Cancel batch' }).click();
      await page
        .getByTestId('progress-text')
        .getByText(/cancelled\. Done\./)
        .waitFor({ timeout: 60_000 });
      await page
        .locator('.badge', { hasText: /cancelled/ })
        .first()
        .waitFor();
      expect(await page.getByRole('button', { name: 'Cancel batch' }).count()).toBe(0);
    } finally {
      await restore();
    }
    noConsoleErrors();
  });

  it('lists batches newest first and loads more by cursor', async () => {
    // 21 more small batches, made behind the page's back, so the list has a second page.
    await kiln.api.admin('patch', '/v1/admin/plans/studio').send({ maxConcurrentBatches: 100 }).expect(200);
    const auth = await apiSession();
    for (let i = 1; i <= 21; i++) {
      await kiln.api.http
        .post('/v1/dashboard/batches')
        .set(auth)
        .send({ prompts: [`filler ${i}`], model: 'eta-image', note: `Filler ${i}` })
        .expect(201);
    }
    await page.goto(app('batches'));
    await heading('Batches').waitFor();
    const items = page.locator('.batch-item');
    await page.getByText('Filler 21').waitFor();
    expect(await items.count()).toBe(20);
    expect(await items.first().textContent()).toContain('Filler 21');
    await page.getByRole('button', { name: 'Load more' }).click();
    await page.getByText('Foxes and lighthouses').waitFor();
    expect(await items.count()).toBe(23);
    expect(await page.getByRole('button', { name: 'Load more' }).count()).toBe(0);
    // Previews come once a batch has an image: reloaded until every batch shown has one (the
    // fillers render in seconds), so the picture in docs/img shows them.
    for (let until = Date.now() + 60_000; ; await new Promise((r) => setTimeout(r, 500))) {
      await page.reload();
      await page.getByText('Filler 21').waitFor();
      if ((await page.locator('.batch-item .thumb-empty').count()) === 0) break;
      if (Date.now() > until) throw new Error('batches without a preview after 60 s');
    }
    // Those in the window (the rest load lazily, as they scroll in).
    await waitUntil(
      page,
      `[...document.querySelectorAll('.batch-item img.thumb')].every((i) => i.getBoundingClientRect().top > innerHeight || (i.complete && i.naturalWidth > 0))`,
      60_000,
    );
    await screenshot(page, 'batches', { docs: true });
    noConsoleErrors();
  });

  it('filters batches by text in the note or the prompts, status, model and date, and clears the filters', async () => {
    await page.goto(app('batches'));
    await heading('Batches').waitFor();
    const items = page.locator('.batch-item');
    await page.getByText('Filler 21').waitFor();
    const filter = page.getByRole('search', { name: 'Filter batches' });
    const titles = async () => await items.locator('.batch-title').allTextContents();
    const apply = async (until: string) => {
      await filter.getByRole('button', { name: 'Filter', exact: true }).click();
      await page.getByRole('list', { name: until }).waitFor({ state: 'attached' });
      await waitUntil(page, `!document.querySelector('.loading')`);
    };
    // A prompt's text (not in the note), any case.
    await filter.getByLabel('Search note and prompts').fill('RED FOX');
    await apply('Batches matching the filters, newest first');
    expect(await titles()).toEqual(['Foxes and lighthouses']);
    // The note's text: Filler 1 and 10 to 19.
    await filter.getByLabel('Search note and prompts').fill('Filler 1');
    await apply('Batches matching the filters, newest first');
    expect((await titles()).sort()).toEqual(['Filler 1', ...Array.from({ length: 10 }, (_, i) => `Filler ${10 + i}`)].sort());
    // Text and model together; then the model alone.
    await filter.getByLabel('Model').selectOption('gamma-5-flash');
    await apply('Batches matching the filters, newest first');
    await page.getByText('No batch matches these filters.').waitFor();
    await filter.getByLabel('Search note and prompts').fill('');
    await apply('Batches matching the filters, newest first');
    expect(await items.count()).toBe(1);
    expect(await items.locator('.batch-meta').first().textContent()).toContain('gamma-5-flash');
    // Status: succeeded batches only; every badge says so.
    await filter.getByLabel('Model').selectOption('');
    await filter.getByLabel('Status').selectOption('succeeded');
    await apply('Batches matching the filters, newest first');
    expect(await items.count()).toBeGreaterThan(0);
    expect(new Set(await items.locator('.badge').allTextContents())).toEqual(new Set(['succeeded']));
    // From tomorrow: nothing.
    await filter.getByLabel('Status').selectOption('');
    await filter.getByLabel('From (UTC day)').fill(new Date(Date.now() + 86_400_000).toISOString().slice(0, 10));
    await apply('Batches matching the filters, newest first');
    await page.getByText('No batch matches these filters.').waitFor();
    await screenshot(page, 'batches-filtered');
    await filter.getByRole('button', { name: 'Clear filters' }).click();
    await page.getByRole('list', { name: 'Batches, newest first' }).waitFor();
    await page.getByText('Filler 21').waitFor();
    expect(await items.count()).toBe(20);
    noConsoleErrors();
  });

  it('keeps the filters in the URL: reload, back and a shared link show the same batches', async () => {
    await page.goto(app('batches'));
    await page.getByText('Filler 21').waitFor();
    const items = page.locator('.batch-item');
    const filter = page.getByRole('search', { name: 'Filter batches' });
    const search = filter.getByLabel('Search note and prompts');
    const titles = async () => (await items.locator('.batch-title').allTextContents()).sort();
    const settled = async (list: string) => {
      await page.getByRole('list', { name: list }).waitFor({ state: 'attached' });
      await waitUntil(page, `!document.querySelector('.loading')`);
    };
    const matching = 'Batches matching the filters, newest first';
    await search.fill('Filler 1');
    await filter.getByLabel('Model').selectOption('eta-image');
    await filter.getByRole('button', { name: 'Filter', exact: true }).click();
    await page.waitForURL((u) => u.pathname === '/app/batches' && u.searchParams.get('q') === 'Filler 1');
    expect(new URL(page.url()).searchParams.get('model')).toBe('eta-image');
    await settled(matching);
    const filtered = await titles();
    expect(filtered).toEqual(['Filler 1', ...Array.from({ length: 10 }, (_, i) => `Filler ${10 + i}`)].sort());
    // Reload: the same filters, in the form and in the list.
    await page.reload();
    await settled(matching);
    expect(await search.inputValue()).toBe('Filler 1');
    expect(await filter.getByLabel('Model').inputValue()).toBe('eta-image');
    expect(await titles()).toEqual(filtered);
    // A second filter set, then back to the first, then back to none; forward again.
    await search.fill('Filler 2');
    await filter.getByRole('button', { name: 'Filter', exact: true }).click();
    await page.waitForURL((u) => u.searchParams.get('q') === 'Filler 2');
    await settled(matching);
    expect(await titles()).toEqual(['Filler 2', 'Filler 20', 'Filler 21']);
    await page.goBack();
    await page.waitForURL((u) => u.searchParams.get('q') === 'Filler 1');
    await settled(matching);
    expect(await search.inputValue()).toBe('Filler 1');
    expect(await titles()).toEqual(filtered);
    await page.goBack();
    await page.waitForURL((u) => u.pathname === '/app/batches' && u.search === '');
    await settled('Batches, newest first');
    expect(await search.inputValue()).toBe('');
    expect(await items.count()).toBe(20);
    await page.goForward();
    await page.waitForURL((u) => u.searchParams.get('q') === 'Filler 1');
    await settled(matching);
    expect(await titles()).toEqual(filtered);
    // A shared link: opened afresh, it shows what it names.
    await page.goto(app('batches?model=gamma-5-flash'));
    await settled(matching);
    expect(await filter.getByLabel('Model').inputValue()).toBe('gamma-5-flash');
    expect(await items.count()).toBe(1);
    // The nav's Batches link: every batch again.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Batches', exact: true }).click();
    await settled('Batches, newest first');
    expect(await filter.getByLabel('Model').inputValue()).toBe('');
    expect(await items.count()).toBe(20);
    noConsoleErrors();
  });

  it('usage: per key and per model, images made and credits spent, as the batches add up', async () => {
    const list = await kiln.api.http
      .get('/v1/dashboard/batches?limit=100')
      .set(await apiSession())
      .expect(200);
    const byModel = new Map<string, { images: number; credits: number }>();
    for (const b of list.body.batches) {
      const m = byModel.get(b.model) ?? { images: 0, credits: 0 };
      m.images += b.counts.succeeded;
      m.credits += b.creditsCharged - b.creditsRefunded;
      byModel.set(b.model, m);
    }
    await page.goto(app('usage'));
    await heading('Usage').waitFor();
    const perModel = page.getByRole('table', { name: 'Per model' });
    await perModel.waitFor();
    const rows = Object.fromEntries(
      await perModel
        .locator('tbody tr')
        .evaluateAll((trs) =>
          trs.map((tr) => [tr.querySelector('th')!.textContent, [...tr.querySelectorAll('td')].map((td) => td.textContent)]),
        ),
    );
    expect(Object.keys(rows).sort()).toEqual([...byModel.keys()].sort());
    for (const [model, m] of byModel)
      expect({ model, images: rows[model][1], credits: rows[model][2] }).toEqual({
        model,
        images: String(m.images),
        credits: String(m.credits),
      });
    // Every batch so far came from the dashboard: one row, no key.
    const perKey = page.getByRole('table', { name: 'Per API key' });
    expect(await perKey.locator('tbody th').allTextContents()).toEqual(['Dashboard (no key)']);
    noConsoleErrors();
  });

  it("edits a key's budget and models allowlist, and the account's low-credit alert", async () => {
    const auth = await apiSession();
    const created = await kiln.api.http.post('/v1/dashboard/keys').set(auth).send({ name: 'budgeted' }).expect(201);
    const keyId = created.body.key.id as string;
    const readKey = async () =>
      (await kiln.api.http.get('/v1/dashboard/keys').set(auth).expect(200)).body.keys.find((k: { id: string }) => k.id === keyId);
    await page.goto(app('keys'));
    await heading('API keys').waitFor();
    await page.getByRole('button', { name: 'Limits of budgeted' }).click();
    const dialog = page.getByRole('dialog', { name: 'Limits of “budgeted”' });
    await dialog.getByLabel('Budget (credits)').fill('0');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    await dialog.getByText('The budget is a whole number of credits, at least 1.').waitFor();
    await dialog.getByLabel('Budget (credits)').fill('250');
    await dialog.getByLabel('Per').selectOption('week');
    await dialog.getByRole('checkbox', { name: 'eta-image', exact: true }).check();
    await screenshot(page, 'key-limits', { docs: true });
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    await dialog.waitFor({ state: 'hidden' });
    const row = page.locator('tr', { hasText: 'budgeted' });
    await row.getByText('0 / 250 per week').waitFor();
    await row.getByText('eta-image only').waitFor();
    expect(await readKey()).toMatchObject({ budget: { credits: 250, period: 'week', spent: 0 }, models: ['eta-image'] });
    // Cleared: no budget, every model.
    await page.getByRole('button', { name: 'Limits of budgeted' }).click();
    await dialog.getByLabel('Budget (credits)').fill('');
    await dialog.getByRole('checkbox', { name: 'eta-image', exact: true }).uncheck();
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await row.getByText('none').waitFor();
    expect(await readKey()).toMatchObject({ budget: null, models: [] });

    await page.goto(app('usage'));
    await heading('Usage').waitFor();
    await page.getByLabel('Alert when the balance falls below (credits)').fill('50');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText('Alert below 50 credits saved.').waitFor();
    const account = async () => (await kiln.api.http.get('/v1/dashboard/account').set(auth).expect(200)).body.account;
    expect((await account()).lowCreditsThreshold).toBe(50);
    await page.reload();
    expect(await page.getByLabel('Alert when the balance falls below (credits)').inputValue()).toBe('50');
    await page.getByLabel('Alert when the balance falls below (credits)').fill('');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText('No low-credit alert.').waitFor();
    expect((await account()).lowCreditsThreshold).toBeNull();
    noConsoleErrors();
  });

  it('new batch: a tier picker for models with an economy tier only; economy priced live and created on the economy tier', async () => {
    // gamma-5-pro: 1K 6, 2K 12 at standard; economy at 1K only, 3 credits within 24 h, on a
    // route that runs upstream batches (the simulated type's local batch API). eta-image has none.
    await kiln.api
      .admin('patch', '/v1/admin/models/gamma-5-pro')
      .send({ provider: { type: 'simulated', batch: { enabled: true } }, economyCreditCost: { '1K': 3 }, economyWindowHours: 24 })
      .expect(200);
    await page.goto(app('batches/new'));
    await heading('New batch').waitFor();
    const picker = page.getByRole('group', { name: 'Tier' });
    const standard = picker.getByRole('radio', { name: /^Standard/ });
    const economy = picker.getByRole('radio', { name: /^Economy/ });
    const estimate = page.getByTestId('estimate');

    await page.getByLabel('Model').selectOption('eta-image');
    await page.getByLabel('Prompts, one per line').fill('a harbour at dawn\na harbour at dusk');
    await estimate.getByText('2 credits').waitFor(); // eta-image: 2 images x 1
    expect(await picker.count()).toBe(0);
    expect(await page.getByRole('radio', { name: /Economy/ }).count()).toBe(0);

    await page.getByLabel('Model').selectOption('gamma-5-pro');
    await page.getByLabel('Resolution').selectOption('1K');
    await page.getByLabel('Images per prompt').fill('2');
    await picker.waitFor();
    expect(await standard.isChecked()).toBe(true);
    await picker.getByText('Standard — 6 credits per image, rendered right away').waitFor();
    await picker.getByText('Economy — 3 credits per image, ready within 24 hours').waitFor();
    await estimate.getByText('24 credits').waitFor(); // 4 images x 6
    expect(await estimate.textContent()).not.toContain('Economy tier');

    await economy.check();
    await estimate.getByText('12 credits').waitFor(); // 4 images x 3
    await estimate.getByText('Economy tier: every image ready within 24 hours').waitFor();
    // 2K has no economy price: economy is disabled there and the form falls back to standard.
    await page.getByLabel('Resolution').selectOption('2K');
    await picker.getByText('Economy — not at 2K (only 1K)').waitFor();
    expect(await economy.isDisabled()).toBe(true);
    expect(await standard.isChecked()).toBe(true);
    await estimate.getByText('48 credits').waitFor(); // 4 images x 12
    await page.getByLabel('Resolution').selectOption('1K');
    await economy.check();
    await estimate.getByText('12 credits').waitFor();
    await screenshot(page, 'new-batch-economy', { fullPage: true });

    const sent: unknown[] = [];
    const onRequest = (r: import('playwright-core').Request) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/dashboard/batches') sent.push(r.postDataJSON());
    };
    page.on('request', onRequest);
    await page.getByRole('button', { name: 'Create batch' }).click();
    await page.waitForURL(/\/app\/batches\/[0-9a-f-]{36}$/);
    page.off('request', onRequest);
    expect(sent).toEqual([expect.objectContaining({ model: 'gamma-5-pro', resolution: '1K', countPerCombo: 2, tier: 'economy' })]);
    const id = page.url().split('/').pop()!;
    const created = await kiln.api.http
      .get(`/v1/dashboard/batches/${id}`)
      .set(await apiSession())
      .expect(200);
    expect(created.body.batch).toMatchObject({ model: 'gamma-5-pro', tier: 'economy', total: 4, creditsCharged: 12 });
    expect(created.body.batch.expiresAt).toBe(created.body.batch.createdAt + 24 * 3_600_000);
    noConsoleErrors();
  });

  it('new batch: a .jsonl whose lines choose tiers makes a batch per tier, priced together first; a line without one takes the picker', async () => {
    // gamma-5-pro keeps the economy tier the test above gave it: 1K 6 standard, 3 economy; none at 2K.
    await kiln.api
      .admin('post', `/v1/admin/accounts/${accountId}/credits`)
      .send({ amount: 100, reason: 'browser test, tiers' })
      .expect(200);
    await page.goto(app('batches/new'));
    await heading('New batch').waitFor();
    await page.getByLabel('Model').selectOption('gamma-5-pro');
    await page.getByLabel('Resolution').selectOption('1K');
    const picker = page.getByRole('group', { name: 'Tier' });
    const estimate = page.getByTestId('estimate');
    const tiers = page.getByTestId('file-settings');
    const planRows = async () =>
      (await page.getByTestId('batch-plan').locator('tbody tr').allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
    const textarea = page.getByLabel('Prompts, one per line');
    const promptFiles = page.locator('input[type=file][accept=".txt,.jsonl"]');
    const jsonl = (name: string, text: string) => ({ name, mimeType: 'application/x-ndjson', buffer: Buffer.from(text) });

    await promptFiles.setInputFiles([jsonl('bad.jsonl', '"a fox"\n\n{"prompt":"a hare","tier":"cheap"}\n')]);
    await page.getByRole('alert').getByText('bad.jsonl:3: "tier" must be "standard" or "economy"').waitFor();
    expect(await textarea.inputValue()).toBe('');

    await promptFiles.setInputFiles([
      jsonl(
        'mixed.jsonl',
        '{"prompt":"a harbour, economy","tier":"economy"}\n"a harbour, picker"\n{"prompt":"a harbour, standard","tier":"standard"}\n',
      ),
    ]);
    // Economy first, as it first appears; the line without a tier on the picker's standard.
    await tiers.getByText("The file's lines set their own tier; the pickers give what a line leaves out.").waitFor();
    await estimate.getByText('2 batches: 15 credits', { exact: false }).waitFor(); // 1 x 3 + 2 x 6
    // Prompts, batches, images, credits.
    expect(await planRows()).toEqual([
      expect.stringMatching(/^Gamma 5 Pro · \S+ 1K · 1 per prompt · economy 1 1 1 3$/),
      expect.stringMatching(/· standard 2 1 2 12$/),
    ]);
    await screenshot(page, 'new-batch-mixed-tiers', { fullPage: true });
    expect(await textarea.getAttribute('readonly')).not.toBeNull();
    await picker.getByText('For the prompts whose file line chose no tier.').waitFor();
    await picker.getByRole('radio', { name: /^Economy/ }).check();
    await estimate.getByText('2 batches: 12 credits', { exact: false }).waitFor(); // 2 x 3 + 1 x 6
    expect(await planRows()).toEqual([expect.stringMatching(/· economy 2 1 2 6$/), expect.stringMatching(/· standard 1 1 1 6$/)]);

    // No economy price at 2K: the economy line is not moved to standard; nothing can be created.
    w.expectFailedLoads.add(400); // the economy estimate there answers tier_not_available
    await page.getByLabel('Resolution').selectOption('2K');
    await tiers.getByText(/has no economy tier at 2K/).waitFor();
    expect(await page.getByRole('button', { name: /^Create/ }).isDisabled()).toBe(true);
    await page.getByLabel('Resolution').selectOption('1K'); // the picker fell back to standard at 2K
    await estimate.getByText('2 batches: 15 credits', { exact: false }).waitFor();
    const create = page.getByRole('button', { name: 'Create 2 batches' });

    const { sent, created, stop } = watchBatchCreates(page);

    // A plan without economy batches refuses the whole file before either batch is created.
    await kiln.api.admin('patch', '/v1/admin/plans/studio').send({ maxConcurrentEconomyBatches: 0 }).expect(200);
    await create.click();
    await page.getByRole('alert').getByText('(nothing was created)', { exact: false }).waitFor();
    expect(sent).toEqual([]);
    await kiln.api.admin('patch', '/v1/admin/plans/studio').send({ maxConcurrentEconomyBatches: 10 }).expect(200);

    await create.click();
    await page.waitForURL(/\/app\/batches$/);
    await heading('Batches').waitFor();
    stop();
    expect(sent).toEqual([
      // A key per batch: the form's, then the batch's place as the CLI keys it (group, first prompt, count).
      {
        body: expect.objectContaining({ model: 'gamma-5-pro', resolution: '1K', tier: 'economy', prompts: ['a harbour, economy'] }),
        key: expect.stringMatching(/^[0-9a-f-]{36}-0-1$/),
      },
      {
        body: expect.objectContaining({
          model: 'gamma-5-pro',
          resolution: '1K',
          tier: 'standard',
          prompts: ['a harbour, picker', 'a harbour, standard'],
        }),
        key: expect.stringMatching(/^[0-9a-f-]{36}-g1-0-2$/),
      },
    ]);
    expect(sent[0].key!.slice(0, 36)).toBe(sent[1].key!.slice(0, 36));
    expect(created).toHaveLength(2);
    const session = await apiSession();
    const batches = await Promise.all(
      created.map(
        async (id) =>
          (
            await kiln.api.http
              .get(`/v1/dashboard/batches/${await id}`)
              .set(session)
              .expect(200)
          ).body.batch,
      ),
    );
    expect(batches).toEqual([
      expect.objectContaining({ tier: 'economy', total: 1, creditsCharged: 3 }),
      expect.objectContaining({ tier: 'standard', total: 2, creditsCharged: 12 }),
    ]);
    w.expectFailedLoads.delete(400);
    noConsoleErrors();
  });

  it("new batch: a .jsonl whose lines set model, size, count and seed makes a batch per set, each split by the plan's images per batch; shown and priced before any is created", async () => {
    await kiln.api
      .admin('post', `/v1/admin/accounts/${accountId}/credits`)
      .send({ amount: 100, reason: 'browser test, line settings' })
      .expect(200);
    // Four images a batch on the plan: the file below makes five batches. The page learns the
    // limit with the account (GET /account), so it is loaded afresh.
    await kiln.api.admin('patch', '/v1/admin/plans/studio').send({ maxImagesPerBatch: 4 }).expect(200);
    await page.goto(app('batches/new'));
    await heading('New batch').waitFor();
    await page.getByLabel('Model').selectOption('eta-image');
    await page.getByLabel('Aspect ratio').selectOption('1:1');
    await page.getByLabel('Images per prompt').fill('2');
    await page
      .locator('#prompts-help')
      .getByText("your plan's batches hold up to 4 images each, more make more batches", { exact: false })
      .waitFor();
    const estimate = page.getByTestId('estimate');
    const textarea = page.getByLabel('Prompts, one per line');
    const promptFiles = page.locator('input[type=file][accept=".txt,.jsonl"]');
    const jsonl = (name: string, text: string) => ({ name, mimeType: 'application/x-ndjson', buffer: Buffer.from(text) });

    // The CLI's checks and messages, the line named.
    await promptFiles.setInputFiles([jsonl('bad.jsonl', '"a pier"\n{"prompt":"a gull","resolution":"3K"}\n')]);
    await page.getByRole('alert').getByText('bad.jsonl:2: "resolution" must be "1K", "2K" or "4K"').waitFor();
    await promptFiles.setInputFiles([jsonl('bad.jsonl', '{"prompt":"a gull","seed":-1}\n')]);
    await page.getByRole('alert').getByText('bad.jsonl:1: "seed" must be a whole number 0..2147483647').waitFor();
    expect(await textarea.inputValue()).toBe('');

    const file = [
      '"a pier at dawn"',
      '{"prompt":"a gull over the pier","model":"gamma-5-pro","aspectRatio":"16:9","resolution":"2K","countPerCombo":1}',
      '"a pier at noon"',
      '"a pier at dusk"',
      '{"prompt":"a pier in fog","countPerCombo":3,"seed":40}',
      '{"prompt":"a pier in rain","countPerCombo":3,"seed":40}',
    ].join('\n');
    await promptFiles.setInputFiles([jsonl('pier.jsonl', file)]);
    await page
      .getByTestId('file-settings')
      .getByText(
        "The file's lines set their own model, aspect ratio, resolution, images per prompt and seed; the pickers give what a line leaves out.",
      )
      .waitFor();
    expect(await textarea.getAttribute('readonly')).not.toBeNull();
    // Eta: 3 prompts x 2 = 6 images, 2 prompts a batch; Gamma 5 Pro 2K: 1 x 12; the seeded x 3: a prompt a batch.
    await estimate.getByText('5 batches: 24 credits', { exact: false }).waitFor();
    expect(
      await page
        .getByTestId('batch-plan')
        .locator('tbody tr')
        .allInnerTexts()
        .then((rows) => rows.map((t) => t.replace(/\s+/g, ' ').trim())),
    ).toEqual([
      'Eta Image · 1:1 1K · 2 per prompt · standard 3 2 6 6',
      'Gamma 5 Pro · 16:9 2K · 1 per prompt · standard 1 1 1 12',
      'Eta Image · 1:1 1K · 3 per prompt · standard · seed 40 2 2 6 6',
    ]);
    await screenshot(page, 'new-batch-file', { docs: true, fullPage: true });
    const create = page.getByRole('button', { name: 'Create 5 batches' });

    const { sent, created, stop } = watchBatchCreates(page);

    // More batches than the plan runs at a time: the page cannot wait for a slot as the CLI
    // does, so none is created. (The earlier tests' standard batches are let finish first:
    // each batch alone then fits, and only the five together do not.)
    const auth = await apiSession();
    for (let until = Date.now() + 120_000; ; await new Promise((r) => setTimeout(r, 250))) {
      const { body } = await kiln.api.http.get('/v1/dashboard/account').set(auth).expect(200);
      if (body.limits.activeBatches === 0) break;
      if (Date.now() > until) throw new Error(`${body.limits.activeBatches} standard batches still running`);
    }
    await kiln.api.admin('patch', '/v1/admin/plans/studio').send({ maxConcurrentBatches: 4 }).expect(200);
    await create.click();
    await page
      .getByRole('alert')
      .getByText('The prompts make 5 standard batches; your plan runs 4 at a time and 0 are running (nothing was created)')
      .waitFor();
    expect(sent).toEqual([]);
    await kiln.api.admin('patch', '/v1/admin/plans/studio').send({ maxConcurrentBatches: 100 }).expect(200);

    await create.click();
    await page.waitForURL(/\/app\/batches$/);
    await heading('Batches').waitFor();
    stop();
    const eta = { model: 'eta-image', aspectRatio: '1:1', resolution: '1K', tier: 'standard' };
    expect(sent.map((s) => s.body)).toEqual([
      expect.objectContaining({ ...eta, countPerCombo: 2, prompts: ['a pier at dawn', 'a pier at noon'] }),
      expect.objectContaining({ ...eta, countPerCombo: 2, prompts: ['a pier at dusk'] }),
      expect.objectContaining({
        model: 'gamma-5-pro',
        aspectRatio: '16:9',
        resolution: '2K',
        countPerCombo: 1,
        prompts: ['a gull over the pier'],
      }),
      // The seed runs on across the split, as in the CLI: the second batch's first image is the group's fourth.
      expect.objectContaining({ ...eta, countPerCombo: 3, seed: 40, prompts: ['a pier in fog'] }),
      expect.objectContaining({ ...eta, countPerCombo: 3, seed: 43, prompts: ['a pier in rain'] }),
    ]);
    expect(sent.map((s) => s.key!.slice(37))).toEqual(['0-2', '2-1', 'g1-0-1', 'g2-0-1', 'g2-1-1']);
    expect(new Set(sent.map((s) => s.key!.slice(0, 36))).size).toBe(1);
    expect(created).toHaveLength(5);
    const session = await apiSession();
    const batches = await Promise.all(
      created.map(
        async (id) =>
          (
            await kiln.api.http
              .get(`/v1/dashboard/batches/${await id}`)
              .set(session)
              .expect(200)
          ).body.batch,
      ),
    );
    expect(batches).toEqual([
      expect.objectContaining({ model: 'eta-image', resolution: '1K', countPerCombo: 2, total: 4, creditsCharged: 4 }),
      expect.objectContaining({ model: 'eta-image', resolution: '1K', countPerCombo: 2, total: 2, creditsCharged: 2 }),
      expect.objectContaining({ model: 'gamma-5-pro', aspectRatio: '16:9', resolution: '2K', total: 1, creditsCharged: 12 }),
      expect.objectContaining({ model: 'eta-image', countPerCombo: 3, seed: 40, total: 3, creditsCharged: 3 }),
      expect.objectContaining({ model: 'eta-image', countPerCombo: 3, seed: 43, total: 3, creditsCharged: 3 }),
    ]);
    await kiln.api.admin('patch', '/v1/admin/plans/studio').send({ maxImagesPerBatch: 50 }).expect(200);
    noConsoleErrors();
  });

  it('adds a webhook endpoint (secret once) and test-pings a local receiver, seen in the delivery log', async () => {
    await page.goto(app('webhooks'));
    await heading('Webhooks').waitFor();
    await page.getByLabel('URL').fill(receiver.url('/kiln'));
    await page.getByLabel('Description').fill('local receiver');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = await page.getByTestId('secret').inputValue();
    expect(secret).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'I stored it, hide it' }).click();
    await page.getByRole('button', { name: 'Send test ping' }).click();
    const log = page.locator('.deliveries');
    for (let i = 0; i < 40 && (await log.getByText('delivered', { exact: true }).count()) === 0; i++) {
      await new Promise((r) => setTimeout(r, 250));
      await log.getByRole('button', { name: 'Refresh' }).click();
    }
    await log.getByText('delivered', { exact: true }).waitFor();
    await log.getByRole('cell', { name: 'ping' }).waitFor();
    const ping = receiver.received.find((r) => r.path === '/kiln')!;
    const event = new Webhook(secret).verify(ping.body, ping.headers as Record<string, string>) as { type: string };
    expect(event.type).toBe('ping');
    await screenshot(page, 'webhooks', { docs: true });
    noConsoleErrors();
  });

  it('is reachable by keyboard with a visible focus', async () => {
    await page.goto(app('keys'));
    await heading('API keys').waitFor();
    await waitUntil(page, `document.activeElement?.tagName === 'H1'`);
    // Each page puts focus on its heading; from there Tab goes on into the page and
    // Shift+Tab back through the header to the skip link.
    const walk = async (key: string, until: string) => {
      const seen: string[] = [];
      for (let i = 0; i < 40; i++) {
        await page.keyboard.press(key);
        const focused = await page.evaluate<{
          label: string;
          outline: string;
        }>(`(() => { const e = document.activeElement; const s = getComputedStyle(e);
          return { label: (e.getAttribute('aria-label') || e.textContent || e.id || e.tagName).trim(), outline: s.outlineStyle }; })()`);
        expect({ label: focused.label, outline: focused.outline }).not.toEqual({ label: focused.label, outline: 'none' });
        seen.push(focused.label);
        if (focused.label === until) break;
      }
      return seen;
    };
    expect(await walk('Tab', 'Create key')).toEqual(expect.arrayContaining(['key-name', 'key-cap', 'Create key']));
    await heading('API keys').focus();
    const back = await walk('Shift+Tab', 'Skip to content');
    expect(back).toEqual([
      'Sign out',
      'Webhooks',
      'API keys',
      'Usage',
      'New batch',
      'Batches',
      'Overview',
      'Kiln overview',
      'Skip to content',
    ]);
    noConsoleErrors();
  });

  it('loads at most 30 KB of JS and CSS (gzipped) for the first page', async () => {
    const fresh = await WatchedPage.open(browser, DESKTOP);
    fresh.expectFailedLoads.add(401);
    const loaded: Array<Promise<{ url: string; gzipped: number }>> = [];
    fresh.page.on('response', (res) => {
      const type = res.request().resourceType();
      if (type === 'script' || type === 'stylesheet')
        loaded.push(res.body().then((b) => ({ url: res.url(), gzipped: gzipSync(b, { level: 9 }).length })));
    });
    await fresh.page.goto(app());
    await fresh.page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await fresh.page.waitForLoadState('networkidle');
    const files = await Promise.all(loaded);
    await fresh.close();
    expect(files.length).toBeGreaterThanOrEqual(2);
    const total = files.reduce((s, f) => s + f.gzipped, 0);
    console.log(`first page JS + CSS: ${(total / 1024).toFixed(1)} KB gzipped in ${files.length} files`);
    expect(total).toBeLessThanOrEqual(30 * 1024);
  });

  it('says so when the api answers 503, and recovers on retry', async () => {
    w.expectFailedLoads.add(503);
    await page.route('**/v1/dashboard/batches?**', (route) =>
      route.fulfill({
        status: 503,
        contentType: 'application/json',
        headers: { 'Retry-After': '1' },
        body: JSON.stringify({ error: { code: 'service_unavailable', message: 'PostgreSQL did not answer' } }),
      }),
    );
    await page.goto(app('batches'));
    await page.getByRole('alert').getByText('Kiln is temporarily unavailable (503)').waitFor();
    await screenshot(page, 'batches-503');
    await page.unroute('**/v1/dashboard/batches?**');
    await page.getByRole('button', { name: 'Try again' }).click();
    await page.getByText('Filler 21').waitFor();

    // At start: the app cannot even tell who is signed in.
    const unavailable = (route: import('playwright-core').Route) =>
      route.fulfill({
        status: 503,
        contentType: 'application/json',
        body: JSON.stringify({ error: { code: 'service_unavailable', message: 'Redis is not reachable' } }),
      });
    await page.route('**/v1/dashboard/account', unavailable);
    await page.reload();
    await page.getByRole('alert').getByText('Kiln is temporarily unavailable (503)').waitFor();
    await page.unroute('**/v1/dashboard/account', unavailable);
    await page.getByRole('button', { name: 'Try again' }).click();
    await heading('Batches').waitFor();
    w.expectFailedLoads.delete(503);
    noConsoleErrors();
  });

  it('sends a signed-out session to the sign-in page with the reason', async () => {
    w.expectFailedLoads.add(401);
    await page.goto(app());
    await heading('Overview').waitFor();
    const cookie = (await w.context.cookies()).find((c) => c.name === 'kiln_session')!;
    // The session ends elsewhere (another tab signs out): the next request learns it.
    await kiln.api.http
      .post('/v1/dashboard/logout')
      .set('Cookie', `kiln_session=${cookie.value}`)
      .set('X-Kiln-Session', 'cookie')
      .expect(204);
    // The next request learns it: this navigation's, or a background refresh's that came first
    // (then the app is already on the sign-in page and the link is gone).
    const signedOut = page.getByText('You were signed out. Sign in again.');
    await page
      .getByRole('link', { name: 'Batches' })
      .click({ timeout: 5_000 })
      .catch(() => undefined);
    await signedOut.waitFor();
    await signIn(page);
    w.expectFailedLoads.delete(401);
    noConsoleErrors();
  });

  it("shows a failed image's error and its code, on its tile and under Failed tasks", async () => {
    // The batch keeps the route it was created with: every render fails, and is not retried.
    const restore = await routeModel(kiln.api, 'gamma-5-flash', { type: 'simulated', failureRate: 1 });
    const auth = await apiSession();
    try {
      const created = await kiln.api.http
        .post('/v1/dashboard/batches')
        .set(auth)
        .send({ prompts: ['a storm that never renders'], model: 'gamma-5-flash', note: 'A batch that failed' })
        .expect(201);
      failedBatchId = created.body.id;
    } finally {
      await restore();
    }
    await page.goto(app(`batches/${failedBatchId}`));
    await heading('A batch that failed').waitFor();
    await page.getByTestId('progress-text').getByText('0 of 1 images ready, 1 failed. Done.').waitFor({ timeout: 60_000 });
    // The bar counts images ready: a failed batch's is empty, not full.
    expect(await page.getByRole('progressbar', { name: 'Images ready' }).evaluate((el) => (el as HTMLProgressElement).value)).toBe(0);
    const { body } = await kiln.api.http.get(`/v1/dashboard/batches/${failedBatchId}`).set(auth).expect(200);
    const task = body.tasks[0] as { error: string; errorCode: string };
    expect(task.errorCode).toMatch(/^[a-z_]+$/);
    await page.locator('.tile-failed').getByText(task.error).waitFor();
    const failure = page.locator('.failures li').first();
    expect(await failure.textContent()).toBe(`#1 a storm that never renders: ${task.error} (${task.errorCode})`);
    noConsoleErrors();
  });

  /** Issue 45's findings, each measured on the page at this viewport. */
  async function checkFindings(p: Page, name: string, viewport: Viewport) {
    const box = async (selector: string) => (await p.locator(selector).first().boundingBox())!;
    // A compact header: one row on a phone (brand, balance, menu), the nav behind "Menu".
    const header = await box('header.top');
    if (viewport === PHONE) {
      expect(header.height).toBeLessThanOrEqual(60);
      await p.getByRole('button', { name: 'Menu' }).click();
      await p.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Batches' }).waitFor();
      expect(await offScreenElements(p)).toEqual([]);
      await p.getByRole('button', { name: 'Menu' }).click();
      await p.getByRole('navigation', { name: 'Main' }).waitFor({ state: 'hidden' });
    } else {
      expect(header.height).toBeLessThanOrEqual(64);
    }
    // No word cut across two lines where it would fit on one (a name in a squeezed table column).
    expect({ name, broken: await brokenWords(p, 'h1, h2, th, td, dt, dd, label, legend, button, .badge, .batch-title') }).toEqual({
      name,
      broken: [],
    });
    if (name === 'overview') {
      // The last bar whole, the legend showing a day's figure at rest, one y-axis.
      const chart = p.locator('.chart-box');
      const [lastBarRight, plotRight] = [
        Number(await chart.getAttribute('data-last-bar-right')),
        Number(await chart.getAttribute('data-plot-right')),
      ];
      expect(plotRight).toBeGreaterThan(0);
      expect(lastBarRight).toBeLessThanOrEqual(plotRight);
      const values = await p.locator('.chart .u-legend .u-value').allTextContents();
      expect(values.length).toBe(2);
      expect(values.filter((t) => t.trim() === '' || t.includes('--'))).toEqual([]);
      expect(await p.locator('.chart .u-axis').count()).toBe(2);
    }
    if (name === 'batches') {
      // Each batch's status and counts are seen at every width.
      for (const item of await p.locator('.batch-item').all()) {
        expect(await item.locator('.badge').isVisible()).toBe(true);
        expect(await item.locator('.counts').isVisible()).toBe(true);
        expect(await item.locator('.counts').textContent()).toMatch(/\d+\/\d+ done/);
      }
    }
    if (name === 'keys') {
      // The key hint on one line.
      const hint = p.locator('.key-hint:visible').first();
      const lineHeight = await hint.evaluate((el) => parseFloat(getComputedStyle(el).lineHeight));
      expect((await hint.boundingBox())!.height).toBeLessThan(lineHeight * 1.5);
      expect(await hint.textContent()).toMatch(/^kiln_/);
      // A key's budget and models allowlist fit the window too.
      await p.getByRole('button', { name: 'Limits of budgeted' }).click();
      const limits = p.getByRole('dialog', { name: 'Limits of “budgeted”' });
      await limits.getByLabel('Budget (credits)').waitFor();
      expect(await offScreenElements(p)).toEqual([]);
      expect(await limits.evaluate((d) => d.getBoundingClientRect().bottom <= window.innerHeight)).toBe(true);
      await screenshot(p, `key-limits-${viewport.name}`, { docs: true });
      await limits.getByRole('button', { name: 'Cancel' }).click();
      await limits.waitFor({ state: 'hidden' });
    }
    if (name === 'webhooks') {
      // Every event the api sends can be chosen, the spend alerts too.
      for (const event of ['credits.low', 'key.budget.threshold'])
        expect(await p.getByRole('group', { name: 'Events' }).getByRole('checkbox', { name: event, exact: true }).count()).toBe(1);
    }
    if (name === 'batch') {
      // Tiles keep the images' 16:9 framing (no square crop).
      const tile = await box('.tile');
      expect(tile.width / tile.height).toBeCloseTo(16 / 9, 1);
      const fit = await p
        .locator('.tile img')
        .first()
        .evaluate((el) => getComputedStyle(el).objectFit);
      expect(fit).toBe('contain');
      // The viewer: its bar (previous, next, original, close) in the window, with the image's
      // details under the image; scrolled to the details, the bar stays.
      await p.getByRole('button', { name: /^Open image 1:/ }).click();
      const viewer = p.getByRole('dialog', { name: 'Image' });
      await viewer.getByTestId('image-details').waitFor();
      await waitUntil(p, `document.querySelector('[data-testid=viewer-image]')?.naturalWidth > 0`);
      const bar = [
        viewer.getByRole('button', { name: 'Previous image' }),
        viewer.getByRole('button', { name: 'Next image' }),
        viewer.getByRole('link', { name: 'Original' }),
        viewer.getByRole('button', { name: 'Close' }),
      ];
      const inWindow = async () =>
        Promise.all(
          bar.map(async (b) => {
            const r = (await b.boundingBox())!;
            return r.x >= 0 && r.y >= 0 && r.x + r.width <= viewport.width && r.y + r.height <= viewport.height;
          }),
        );
      expect(await inWindow()).toEqual([true, true, true, true]);
      expect(await offScreenElements(p)).toEqual([]);
      expect(await brokenWords(p, 'dialog dt, dialog dd, dialog button')).toEqual([]);
      if (viewport === DESKTOP) {
        // On a desktop the details sit beside the image: Copy URL and Download show unscrolled.
        for (const action of [
          viewer.getByTestId('image-details').getByRole('button', { name: 'Copy URL' }),
          viewer.getByTestId('image-details').getByRole('link', { name: 'Download' }),
        ]) {
          const r = (await action.boundingBox())!;
          expect(r.y + r.height).toBeLessThanOrEqual(viewport.height);
        }
      }
      await screenshot(p, `image-viewer-${viewport.name}`, { docs: true });
      await viewer.evaluate((d) => d.scrollTo(0, d.scrollHeight));
      await viewer.getByTestId('image-details').getByRole('link', { name: 'Download' }).waitFor();
      expect(await inWindow()).toEqual([true, true, true, true]);
      await viewer.getByRole('button', { name: 'Close' }).click();
      await viewer.waitFor({ state: 'hidden' });
    }
    {
      // Every picker (model, resolution, ...) shows its whole label, and every empty field its
      // whole placeholder: a select or an input never wraps, it cuts.
      const cut = await p.locator('select:visible, input[placeholder]:visible').evaluateAll((fields) =>
        fields.flatMap((el) => {
          const field = el as HTMLSelectElement | HTMLInputElement;
          if (field instanceof HTMLInputElement && field.value !== '') return [];
          const probe = document.createElement('span');
          probe.style.font = getComputedStyle(field).font;
          probe.style.whiteSpace = 'pre';
          probe.style.position = 'absolute';
          probe.textContent = field instanceof HTMLSelectElement ? (field.selectedOptions[0]?.textContent ?? '') : field.placeholder;
          document.body.append(probe);
          const text = probe.getBoundingClientRect().width;
          probe.remove();
          const cs = getComputedStyle(field);
          // The arrow (a number field's spinner) takes about 1.25rem of the padding box.
          const room = field.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20;
          return text <= room ? [] : [`${field.id}: "${probe.textContent}" needs ${Math.ceil(text)} px, has ${Math.floor(room)}`];
        }),
      );
      expect(cut).toEqual([]);
    }
    if (name === 'new-batch') {
      // Fields side by side line up: a select is as tall as the text input beside it.
      const heights = await p
        .locator('select:visible, input[type=text]:visible, input[type=number]:visible')
        .evaluateAll((els) => [...new Set(els.map((e) => Math.round(e.getBoundingClientRect().height)))]);
      expect(heights.length).toBe(1);
    }
  }

  describe.each([DESKTOP, PHONE])('every page at $width x $height: axe-core, fit, screenshots', (viewport: Viewport) => {
    it('has no serious or critical accessibility violations and no sideways scrolling', async () => {
      const v = await WatchedPage.open(browser, viewport);
      try {
        v.expectFailedLoads.add(401);
        await v.page.goto(`${kiln.url}/app/signin`);
        await v.page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
        const report: Record<string, unknown> = { signin: await seriousA11yViolations(v.page) };
        // Sign-up states the password rule in text, not only in the browser's tooltip.
        await v.page.goto(`${kiln.url}/app/signup`);
        await v.page.getByText('At least 10 characters').waitFor();
        expect(await v.page.getByLabel('Password').getAttribute('aria-describedby')).toBe('password-help');
        report.signup = await seriousA11yViolations(v.page);
        await screenshot(v.page, `signup-${viewport.name}`, { docs: true });
        expect(await offScreenElements(v.page)).toEqual([]);
        await signIn(v.page);
        v.expectFailedLoads.delete(401);
        const pages: Array<[string, string, string]> = [
          ['overview', '', 'Overview'],
          ['batches', 'batches', 'Batches'],
          ['batch', `batches/${firstBatchId}`, 'Foxes and lighthouses'],
          ['batch-failed', `batches/${failedBatchId}`, 'A batch that failed'],
          ['new-batch', 'batches/new', 'New batch'],
          ['keys', 'keys', 'API keys'],
          ['usage', 'usage', 'Usage'],
          ['webhooks', 'webhooks', 'Webhooks'],
        ];
        for (const [name, path, title] of pages) {
          await v.page.goto(app(path));
          await v.page.getByRole('heading', { level: 1, name: title }).waitFor();
          if (name === 'overview') await v.page.locator('.chart-box canvas').waitFor();
          if (name === 'batch') await v.page.getByText('4 of 4 images ready. Done.').waitFor();
          if (name === 'batch-failed') await v.page.getByText('0 of 1 images ready, 1 failed. Done.').waitFor();
          report[name] = await seriousA11yViolations(v.page);
          expect({ name, overflow: await horizontalOverflow(v.page) }).toEqual({ name, overflow: 0 });
          expect({ name, offScreen: await offScreenElements(v.page) }).toEqual({ name, offScreen: [] });
          await checkFindings(v.page, name, viewport);
          // Every page at both sizes goes to docs/img (npm run docs:screenshots), whole (the
          // chart's legend, the keys table) but for the batch list, whose previews below the
          // window load only as they scroll in.
          await screenshot(v.page, `${name}-${viewport.name}`, { docs: true, fullPage: name !== 'batches' });
        }
        expect(Object.entries(report).filter(([, v]) => (v as unknown[]).length > 0)).toEqual([]);
        expect(v.errors).toEqual([]);
      } finally {
        await v.close();
      }
    });
  });
});
