import { existsSync, mkdirSync, readFileSync, copyFileSync } from 'node:fs';
import * as path from 'node:path';
import { Browser, BrowserContext, chromium, ConsoleMessage, Page } from 'playwright-core';

/*
 * Debian's Chromium (apt-get install chromium; scripts/test-browser.sh installs it) driven by
 * playwright-core, which downloads no browser of its own. The flags keep it off the network
 * it would otherwise try (Google's hosts), which this project's machines refuse.
 */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

export const DESKTOP = { name: 'desktop', width: 1280, height: 800 };
export const PHONE = { name: 'phone', width: 390, height: 844 };
export type Viewport = typeof DESKTOP;

const ROOT = path.resolve(__dirname, '../..');
/** Every run's screenshots; `npm run docs:screenshots` also copies the named ones to docs/img. */
export const SHOTS_DIR = path.join(ROOT, '.kiln', 'browser-screenshots');
const DOCS_IMG = path.join(ROOT, 'docs', 'img');

export function requireBuiltApp(): void {
  if (!existsSync(path.join(ROOT, 'dist', 'web', 'index.html'))) throw new Error('dist/web is missing: run npm run build first');
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (scripts/test-browser.sh does)`);
}

export function launch(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS, timeout: 60_000 });
}

/**
 * A page whose console errors and uncaught exceptions are collected. `expectFailedLoads`
 * lists the HTTP statuses the test itself provokes (a signed-out visit's 401, a simulated
 * 503): Chromium logs each failed fetch as a console error, and those are not the app's.
 */
export class WatchedPage {
  readonly errors: string[] = [];
  expectFailedLoads = new Set<number>();

  private constructor(
    readonly context: BrowserContext,
    readonly page: Page,
  ) {
    page.on('console', (m: ConsoleMessage) => {
      if (m.type() !== 'error') return;
      // Chromium drops loads in flight when the host's interfaces change (another process
      // adding a network namespace or a veth on this shared machine): the host's doing.
      if (m.text().includes('net::ERR_NETWORK_CHANGED')) return;
      const status = /status of (\d{3})/.exec(m.text());
      if (status && this.expectFailedLoads.has(Number(status[1]))) return;
      this.errors.push(`${m.text()} (${m.location().url})`);
    });
    page.on('pageerror', (e) => this.errors.push(`uncaught: ${e.message}`));
  }

  static async open(browser: Browser, viewport: Viewport): Promise<WatchedPage> {
    const context = await browser.newContext({
      viewport: { width: viewport.width, height: viewport.height },
      acceptDownloads: true,
      reducedMotion: 'reduce',
    });
    context.setDefaultTimeout(30_000);
    return new WatchedPage(context, await context.newPage());
  }

  close(): Promise<void> {
    return this.context.close();
  }
}

const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * axe-core on the page as it is: serious and critical violations (WCAG 2.1 AA rules). Loaded
 * through the DevTools protocol, which the page's CSP does not govern, so the CSP stays on.
 */
export async function seriousA11yViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  const result =
    await page.evaluate(`axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } })
    .then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) })))`);
  return (result as AxeViolation[]).filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** Saves a screenshot; with KILN_UPDATE_SCREENSHOTS=1 a name under docs/img is refreshed too. */
export async function screenshot(page: Page, name: string, opts: { docs?: boolean; fullPage?: boolean } = {}): Promise<string> {
  mkdirSync(SHOTS_DIR, { recursive: true });
  const file = path.join(SHOTS_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: opts.fullPage ?? false, animations: 'disabled' });
  if (opts.docs && process.env.KILN_UPDATE_SCREENSHOTS === '1') {
    mkdirSync(DOCS_IMG, { recursive: true });
    copyFileSync(file, path.join(DOCS_IMG, `${name}.png`));
  }
  return file;
}

/** Layout that fits the viewport: nothing wider than the window (no sideways scrolling). */
export async function horizontalOverflow(page: Page): Promise<number> {
  return await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
}

/**
 * Every visible element whose box leaves the window sideways, described: what a user would see
 * cut off at the edge. An element inside a box that clips or scrolls (overflow other than
 * visible: an ellipsis, a scrolling table) is that box's business, and visually hidden text
 * (.sr-only, the skip link off screen) is not seen; the page's own scrollWidth is checked too.
 */
export async function offScreenElements(page: Page): Promise<string[]> {
  return await page.evaluate<string[]>(`(() => {
    const out = [];
    const vw = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth > vw) out.push('page scrollWidth ' + document.documentElement.scrollWidth + ' > ' + vw);
    const clipped = (el) => {
      for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        if (getComputedStyle(a).overflowX !== 'visible') return true;
      }
      return false;
    };
    for (const el of document.body.querySelectorAll('*')) {
      if (el.closest('.sr-only, .skip, dialog:not([open])')) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      if (r.right <= vw + 0.5 && r.left >= -0.5) continue;
      if (clipped(el)) continue;
      out.push(el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '') + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
    }
    return out;
  })()`);
}

/**
 * Words cut across two lines though they would fit on one: "Dashboar|d", "gamma-5-|pro" in a
 * table squeezed on a phone. Each visible element matching `selector` is read word by word
 * (runs of non-space); a word whose text spans two line boxes while its width is within the
 * room it had is listed. The room is the element's content width, and in a table at least
 * half the table's width: a column squeezed under its words beside figures that have room to
 * give (the phone's usage tables before) is the defect. A word wider than that (a long id)
 * may break: nothing else would fit it.
 */
export async function brokenWords(page: Page, selector: string): Promise<string[]> {
  return await page.evaluate<string[]>(`(() => {
    const out = new Set();
    for (const el of document.querySelectorAll(${JSON.stringify(selector)})) {
      if (!el.checkVisibility()) continue;
      const cs = getComputedStyle(el);
      let room = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
      const table = el.closest('table');
      if (table) room = Math.max(room, table.clientWidth / 2);
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        for (const m of n.data.matchAll(/\\S+/g)) {
          const range = document.createRange();
          range.setStart(n, m.index);
          range.setEnd(n, m.index + m[0].length);
          const lines = [...range.getClientRects()].filter((r) => r.width > 0);
          if (lines.length < 2) continue;
          const width = lines.reduce((s, r) => s + r.width, 0);
          if (width <= room) out.add(el.tagName.toLowerCase() + ': "' + m[0] + '" (' + Math.ceil(width) + ' px in ' + Math.floor(room) + ')');
        }
      }
    }
    return [...out];
  })()`);
}
