import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { batchCount, routeModel, TestAccount, waitFor } from '@app/testing';
import { LiveKiln, startLiveKiln } from './helpers/live-kiln';

jest.setTimeout(180_000);

const BIN = path.resolve(__dirname, '../bin/kiln.js');
const MODEL = 'beta-2-lite'; // 3 credits an image at 1K

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `kiln ...` as a user runs it (the built bin), in `cwd`, against the live Kiln as `account`. */
function start(kiln: LiveKiln, account: TestAccount | null, args: string[], cwd: string): { child: ChildProcess; done: Promise<Run> } {
  if (!fs.existsSync(path.resolve(__dirname, '../dist/apps/cli/src/main.js'))) throw new Error('run "npm run build" first (npm test does)');
  const env: NodeJS.ProcessEnv = { ...process.env, KILN_URL: kiln.url };
  if (account) env.KILN_API_KEY = account.key;
  else delete env.KILN_API_KEY;
  const child = spawn(process.execPath, [BIN, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const done = new Promise<Run>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, done };
}

const kilnCli = (kiln: LiveKiln, account: TestAccount | null, args: string[], cwd: string) => start(kiln, account, args, cwd).done;

function promptsFile(dir: string, n: number, name = 'prompts.txt'): string {
  const lines = ['# a comment, skipped', ''];
  for (let i = 1; i <= n; i++) lines.push(`prompt number ${i}`);
  fs.writeFileSync(path.join(dir, name), lines.join('\n') + '\n');
  return name;
}

const pngs = (dir: string) =>
  fs.existsSync(dir)
    ? fs
        .readdirSync(dir)
        .filter((f) => f.endsWith('.png'))
        .sort()
    : [];

/** The `kiln` command as a child process against a live Kiln (api on a port, generator). */
describe('kiln command line', () => {
  let kiln: LiveKiln;
  let restore: () => Promise<void>;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cli-'));

  beforeAll(async () => {
    kiln = await startLiveKiln('cli');
    restore = await routeModel(kiln.api, MODEL, { type: 'simulated', latencyMs: { min: 100, max: 250 } });
  });
  afterAll(async () => {
    await restore?.();
    await kiln?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const charged = async (accountId: string): Promise<number> => {
    const [row] = await kiln.api.db.query(
      `SELECT coalesce(-sum(amount), 0)::int AS n FROM ledger_entries WHERE account_id = $1 AND kind = 'batch_charge'`,
      [accountId],
    );
    return row.n;
  };
  const balance = async (accountId: string): Promise<number> => {
    const [row] = await kiln.api.db.query(`SELECT balance::int AS n FROM accounts WHERE id = $1`, [accountId]);
    return row.n;
  };

  it('submit on the starter plan: 25 prompts in 3 batches one at a time, waited and downloaded, exit 0; the same command again charges nothing', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 500 });
    const dir = fs.mkdtempSync(path.join(tmp, 'full-'));
    const file = promptsFile(dir, 25);
    const args = ['submit', file, '--model', MODEL, '--wait', '--out', 'images'];
    const run = await kilnCli(kiln, a, args, dir);
    expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr }).toEqual({ code: 0, stderr: '' });
    const out = path.join(dir, 'images');
    expect(pngs(out)).toHaveLength(25);
    expect(await batchCount(kiln.api, a.id)).toBe(3);
    expect(await charged(a.id)).toBe(75);
    // Not a terminal: one line per change on stderr, and a summary on stdout.
    expect(run.stderr).toMatch(/images 25\/25, failed 0/);
    expect(run.stdout).toMatch(/25\/25 images succeeded/);
    const state = JSON.parse(fs.readFileSync(path.join(out, '.kiln-submit.json'), 'utf8'));
    const [submission] = Object.values<any>(state.submissions);
    expect(submission.chunks.map((c: any) => c.count)).toEqual([10, 10, 5]);
    const before = await balance(a.id);

    const again = await kilnCli(kiln, a, args, dir);
    expect(again.code).toBe(0);
    expect(await batchCount(kiln.api, a.id)).toBe(3);
    expect(await balance(a.id)).toBe(before);
    expect(pngs(out)).toHaveLength(25);
  });

  it('killed half-way (SIGINT) and run again: every image once, charged once', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 500 });
    const dir = fs.mkdtempSync(path.join(tmp, 'sigint-'));
    const file = promptsFile(dir, 25, 'prompts.jsonl');
    fs.writeFileSync(
      path.join(dir, file),
      Array.from({ length: 25 }, (_, i) =>
        i % 2 ? JSON.stringify(`jsonl prompt ${i}`) : JSON.stringify({ prompt: `jsonl prompt ${i}` }),
      ).join('\n') + '\n',
    );
    const args = ['submit', file, '--model', MODEL, '--wait', '--out', 'out', '--json'];
    const first = start(kiln, a, args, dir);
    // Half-way: the first batch is downloaded and the second has been created.
    await waitFor(
      'the first batch to be downloaded and the second created',
      () => {
        try {
          const state = JSON.parse(fs.readFileSync(path.join(dir, 'out', '.kiln-submit.json'), 'utf8'));
          const [s] = Object.values<any>(state.submissions);
          return s.chunks[0].downloaded && s.chunks[1].batchId;
        } catch {
          return false;
        }
      },
      60_000,
      20,
    );
    first.child.kill('SIGINT');
    const stopped = await first.done;
    expect(stopped.code).toBe(130);
    expect(pngs(path.join(dir, 'out')).length).toBeLessThan(25);
    const interrupted = JSON.parse(stopped.stdout);
    expect(interrupted.interrupted).toBe(true);
    // The summary counts what was charged and made, though interrupted: the ledger agrees.
    expect(interrupted.credits.charged).toBe(await charged(a.id));
    expect(interrupted.credits.charged).toBeGreaterThanOrEqual(30 + 30);
    expect(interrupted.images.succeeded).toBeGreaterThanOrEqual(10);
    expect(interrupted.batches.filter((b: any) => b.id)).toHaveLength(2);

    const second = await kilnCli(kiln, a, args, dir);
    expect({ code: second.code, stderr: second.code === 0 ? '' : second.stderr }).toEqual({ code: 0, stderr: '' });
    const outcome = JSON.parse(second.stdout);
    expect(outcome.images).toEqual({ total: 25, succeeded: 25, failed: 0, cancelled: 0, pending: 0 });
    const files = fs.readdirSync(path.join(dir, 'out')).filter((f) => !f.startsWith('.'));
    expect(files).toHaveLength(25);
    expect(files.every((f) => f.endsWith('.png'))).toBe(true);
    expect(await batchCount(kiln.api, a.id)).toBe(3);
    expect(await charged(a.id)).toBe(75);
    const [tasks] = await kiln.api.db.query(
      `SELECT count(*)::int AS n FROM tasks t JOIN batches b ON b.id = t.batch_id WHERE b.account_id = $1`,
      [a.id],
    );
    expect(tasks.n).toBe(25);
  });

  it('a refusal exits 3 and prints the code; nothing is charged', async () => {
    const poor = await kiln.api.account({ plan: 'starter', credits: 2 });
    const dir = fs.mkdtempSync(path.join(tmp, 'refused-'));
    const file = promptsFile(dir, 3);
    const run = await kilnCli(kiln, poor, ['submit', file, '--model', MODEL, '--wait', '--out', 'o'], dir);
    expect(run.code).toBe(3);
    expect(run.stderr).toContain('insufficient_credits');
    expect(await batchCount(kiln.api, poor.id)).toBe(0);
    const status = await kilnCli(kiln, poor, ['status', '00000000-0000-4000-8000-000000000000'], dir);
    expect(status.code).toBe(3);
    expect(status.stderr).toContain('not_found');
  });

  it('a file the balance cannot cover is refused whole before any charge (exit 3); --partial submits what it covers', async () => {
    // 25 prompts in batches of 10, 10 and 5 at 3 credits: 75; the balance covers one batch.
    const a = await kiln.api.account({ plan: 'starter', credits: 40 });
    const dir = fs.mkdtempSync(path.join(tmp, 'whole-'));
    const file = promptsFile(dir, 25);
    const run = await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--wait', '--json'], dir);
    expect(run.code).toBe(3);
    expect(run.stderr).toContain('insufficient_credits');
    const outcome = JSON.parse(run.stdout);
    expect(outcome.refusal).toMatchObject({ code: 'insufficient_credits', details: { creditsRequired: 75, balance: 40, batches: 3 } });
    expect(outcome.credits).toEqual({ charged: 0, refunded: 0 });
    expect(await batchCount(kiln.api, a.id)).toBe(0);
    expect(await balance(a.id)).toBe(40);

    const partial = await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--wait', '--partial', '--json'], dir);
    expect(partial.code).toBe(3);
    const done = JSON.parse(partial.stdout);
    expect(done.refusal.code).toBe('insufficient_credits');
    expect(await batchCount(kiln.api, a.id)).toBe(1);
    expect(done.credits.charged).toBe(30);
    expect(done.images).toMatchObject({ total: 25, succeeded: 10 });
    expect(await balance(a.id)).toBe(10);
  });

  it('.jsonl lines with their own options make one batch per option set; ids are taken by their unique prefix', async () => {
    const a = await kiln.api.account({ plan: 'studio', credits: 500 });
    const dir = fs.mkdtempSync(path.join(tmp, 'lines-'));
    const lines = [
      '"plain one"',
      JSON.stringify({ prompt: 'wide one', aspectRatio: '16:9', note: 'wide' }),
      JSON.stringify({ prompt: 'plain two' }),
      JSON.stringify({ prompt: 'wide two', aspectRatio: '16:9', note: 'wide' }),
      JSON.stringify({ prompt: 'twice', countPerCombo: 2 }),
    ];
    fs.writeFileSync(path.join(dir, 'p.jsonl'), lines.join('\n') + '\n');
    const run = await kilnCli(kiln, a, ['submit', 'p.jsonl', '--model', MODEL, '--wait', '--out', 'o', '--json'], dir);
    expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr }).toEqual({ code: 0, stderr: '' });
    const outcome = JSON.parse(run.stdout);
    expect(outcome.images).toMatchObject({ total: 6, succeeded: 6 });
    expect(outcome.credits.charged).toBe(18);
    const rows = await kiln.api.db.query(`SELECT aspect_ratio, note, count_per_combo, prompts FROM batches WHERE account_id = $1`, [a.id]);
    const made = rows.map((r: any) => `${r.aspect_ratio} ${r.note} x${r.count_per_combo}: ${r.prompts.join(', ')}`).sort();
    expect(made).toEqual(['16:9 wide x1: wide one, wide two', '1:1 null x1: plain one, plain two', '1:1 null x2: twice']);

    const id = outcome.batches[0].id as string;
    const short = id.slice(0, 8);
    expect(fs.readdirSync(path.join(dir, 'o')).some((f) => f.includes(short))).toBe(true);
    const status = await kilnCli(kiln, a, ['status', short, '--json'], dir);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout).batch.id).toBe(id);
    const unknown = await kilnCli(kiln, a, ['status', 'ffffffff'], dir);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toContain('not_found');
    expect((await kilnCli(kiln, a, ['status', 'xyz'], dir)).code).toBe(2);
  });

  it('--seed runs on across the batches of a file (image n: seed + n - 1); --format names and stores the images in it', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 500 });
    const dir = fs.mkdtempSync(path.join(tmp, 'seed-'));
    const file = promptsFile(dir, 12);
    const run = await kilnCli(
      kiln,
      a,
      ['submit', file, '--model', MODEL, '--seed', '100', '--format', 'jpeg', '--wait', '--out', 'o'],
      dir,
    );
    expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr }).toEqual({ code: 0, stderr: '' });
    const files = fs.readdirSync(path.join(dir, 'o')).filter((f) => !f.startsWith('.'));
    expect(files).toHaveLength(12);
    expect(files.every((f) => f.endsWith('.jpg'))).toBe(true);
    const rows = await kiln.api.db.query(
      `SELECT b.seed AS batch_seed, t.seed FROM tasks t JOIN batches b ON b.id = t.batch_id WHERE b.account_id = $1 ORDER BY b.seed, t.seq`,
      [a.id],
    );
    expect([...new Set(rows.map((r: any) => r.batch_seed))]).toEqual([100, 110]);
    expect(rows.map((r: any) => r.seed)).toEqual(Array.from({ length: 12 }, (_, i) => 100 + i));
    expect((await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--seed', '-1'], dir)).code).toBe(2);
    expect((await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--format', 'gif'], dir)).code).toBe(2);
  });

  it('--deadline sends a deadline (a duration or an ISO time) with each batch; a bad one exits 2, a past one is refused (exit 3)', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 500 });
    const dir = fs.mkdtempSync(path.join(tmp, 'deadline-'));
    const file = promptsFile(dir, 3);
    const before = Date.now();
    const run = await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--deadline', '10m', '--wait'], dir);
    expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr }).toEqual({ code: 0, stderr: '' });
    const rows: { deadline: Date }[] = await kiln.api.db.query(`SELECT deadline FROM batches WHERE account_id = $1`, [a.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].deadline.getTime()).toBeGreaterThanOrEqual(before + 600_000);
    expect(rows[0].deadline.getTime()).toBeLessThanOrEqual(Date.now() + 600_000);

    const spent = await charged(a.id);
    expect((await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--deadline', 'soon'], dir)).code).toBe(2);
    const past = await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--count', '2', '--deadline', '2020-01-01T00:00:00Z'], dir);
    expect(past.code).toBe(3);
    expect(past.stderr).toContain('invalid_request');
    expect(await charged(a.id)).toBe(spent);
  });

  it('usage errors exit 2: a missing option, an unknown file type, no API key', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 10 });
    const dir = fs.mkdtempSync(path.join(tmp, 'usage-'));
    fs.writeFileSync(path.join(dir, 'p.csv'), 'a,b\n');
    expect((await kilnCli(kiln, a, ['submit', 'p.csv'], dir)).code).toBe(2);
    fs.writeFileSync(path.join(dir, 'p.txt'), 'a fox\n');
    const noModel = await kilnCli(kiln, a, ['submit', 'p.txt'], dir);
    expect(noModel.code).toBe(2);
    expect(noModel.stderr).toContain('no model');
    const csv = await kilnCli(kiln, a, ['submit', 'p.csv', '--model', MODEL], dir);
    expect(csv.code).toBe(2);
    expect(csv.stderr).toMatch(/\.txt.*\.jsonl/);
    const noKey = await kilnCli(kiln, null, ['me'], dir);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('KILN_API_KEY');
    expect(await batchCount(kiln.api, a.id)).toBe(0);
  });

  it('--json prints one parseable document: me, models, submit, status, ls, wait, download', async () => {
    const a = await kiln.api.account({ plan: 'studio', credits: 500 });
    const dir = fs.mkdtempSync(path.join(tmp, 'json-'));
    const me = JSON.parse((await kilnCli(kiln, a, ['me', '--json'], dir)).stdout);
    expect(me.user.id).toBe(a.id);
    const models = JSON.parse((await kilnCli(kiln, a, ['models', '--json'], dir)).stdout);
    expect(models.models.map((m: any) => m.key)).toContain(MODEL);

    const file = promptsFile(dir, 3);
    const submitted = await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--count', '2', '--json'], dir);
    expect(submitted.code).toBe(0);
    const outcome = JSON.parse(submitted.stdout);
    expect(outcome.batches).toHaveLength(1);
    const id = outcome.batches[0].id as string;
    expect(outcome.images.total).toBe(6);

    const waited = await kilnCli(kiln, a, ['wait', id, '--out', 'w', '--json'], dir);
    expect(waited.code).toBe(0);
    expect(JSON.parse(waited.stdout).files).toHaveLength(6);
    const status = JSON.parse((await kilnCli(kiln, a, ['status', id, '--json'], dir)).stdout);
    expect(status.batch).toMatchObject({ id, done: true, total: 6 });
    const listed = JSON.parse((await kilnCli(kiln, a, ['ls', '--json'], dir)).stdout);
    expect(listed.batches.map((b: any) => b.id)).toEqual([id]);
    const downloaded = JSON.parse((await kilnCli(kiln, a, ['download', id, '--out', 'w', '--json'], dir)).stdout);
    expect(downloaded.files.every((f: any) => f.skipped)).toBe(true);
  });

  it('--estimate prices the whole file across batches and charges nothing', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 500 });
    const dir = fs.mkdtempSync(path.join(tmp, 'estimate-'));
    const file = promptsFile(dir, 25);
    const run = await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--estimate', '--json'], dir);
    expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(run.stdout)).toMatchObject({
      prompts: 25,
      images: 25,
      batches: 3,
      creditsRequired: 75,
      balance: 500,
      affordable: true,
    });
    expect(await batchCount(kiln.api, a.id)).toBe(0);
  });

  describe('the economy tier', () => {
    // gamma-5-pro: 1K 6, 2K 12 at standard; economy 1K 3 within 24 h, on a route that runs
    // upstream batches (the simulated type's local batch API). No collector runs in this tree's
    // generator for it: economy tasks wait pending, which is all these commands need.
    const ECO = 'gamma-5-pro';
    beforeAll(async () => {
      await kiln.api
        .admin('patch', `/v1/admin/models/${ECO}`)
        .send({ provider: { type: 'simulated', batch: { enabled: true } }, economyCreditCost: { '1K': 3 }, economyWindowHours: 24 })
        .expect(200);
    });

    it('kiln models shows both prices, and the economy window', async () => {
      const a = await kiln.api.account({ plan: 'starter', credits: 0 });
      const run = await kilnCli(kiln, a, ['models'], tmp);
      expect(run.code).toBe(0);
      const lines = run.stdout.split('\n');
      expect(lines[0]).toMatch(/^model\s+standard\s+economy \(within\)\s+aspect ratios$/);
      expect(lines.find((l) => l.startsWith(`${ECO} `))).toMatch(new RegExp(`^${ECO}\\s+1K=6 2K=12\\s+1K=3 \\(24 h\\)\\s+1:1 `));
      expect(lines.find((l) => l.startsWith(`${MODEL} `))).toMatch(new RegExp(`^${MODEL}\\s+1K=3\\s+-\\s+1:1 `));
    });

    it('--estimate prices the chosen tier: economy at the economy price with its window, standard by default; nothing charged', async () => {
      const a = await kiln.api.account({ plan: 'studio', credits: 500 });
      const dir = fs.mkdtempSync(path.join(tmp, 'eco-estimate-'));
      const file = promptsFile(dir, 4);
      const economy = await kilnCli(
        kiln,
        a,
        ['submit', file, '--model', ECO, '--count', '2', '--tier', 'economy', '--estimate', '--json'],
        dir,
      );
      expect({ code: economy.code, stderr: economy.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(economy.stdout)).toMatchObject({
        tier: 'economy',
        windowHours: 24,
        images: 8,
        creditsRequired: 24,
        affordable: true,
        refusal: null,
      });
      const standard = await kilnCli(kiln, a, ['submit', file, '--model', ECO, '--count', '2', '--estimate', '--json'], dir);
      expect(JSON.parse(standard.stdout)).toMatchObject({ tier: 'standard', windowHours: null, images: 8, creditsRequired: 48 });
      const human = await kilnCli(kiln, a, ['submit', file, '--model', ECO, '--count', '2', '--tier', 'economy', '--estimate'], dir);
      expect(human.stdout).toContain('credits required 24 at the economy tier (every image within 24 h), balance 500');
      expect(await batchCount(kiln.api, a.id)).toBe(0);
    });

    it('submit --tier economy creates economy batches charged at the economy price; status, ls and me say so', async () => {
      const a = await kiln.api.account({ plan: 'studio', credits: 500 });
      const dir = fs.mkdtempSync(path.join(tmp, 'eco-submit-'));
      const file = promptsFile(dir, 3);
      const run = await kilnCli(kiln, a, ['submit', file, '--model', ECO, '--tier', 'economy', '--json'], dir);
      expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr }).toEqual({ code: 0, stderr: '' });
      const outcome = JSON.parse(run.stdout);
      expect(outcome).toMatchObject({ refusal: null, credits: { charged: 9, refunded: 0 }, images: { total: 3, pending: 3 } });
      const id = outcome.batches[0].id as string;
      expect(await charged(a.id)).toBe(9);
      const status = JSON.parse((await kilnCli(kiln, a, ['status', id, '--json'], dir)).stdout);
      expect(status.batch).toMatchObject({ tier: 'economy', done: false, creditsCharged: 9 });
      expect(status.batch.expiresAt).toBe(status.batch.createdAt + 24 * 3_600_000);
      const line = (await kilnCli(kiln, a, ['status', id.slice(0, 8)], dir)).stdout;
      expect(line).toContain(`${ECO} economy (due by ${new Date(status.batch.expiresAt).toISOString()})`);
      expect((await kilnCli(kiln, a, ['ls'], dir)).stdout).toContain(`${ECO} economy (due by`);
      expect((await kilnCli(kiln, a, ['me'], dir)).stdout).toContain('economy batches: 10 at once (1 not done)');
      // The same command again resumes the same submission: nothing more is charged.
      const again = await kilnCli(kiln, a, ['submit', file, '--model', ECO, '--tier', 'economy', '--json'], dir);
      expect(again.code).toBe(0);
      expect(await charged(a.id)).toBe(9);
      expect(await batchCount(kiln.api, a.id)).toBe(1);
    });

    it('a .jsonl line carries its own tier over --tier: estimate and submit split the file by tier, each batch charged at its price', async () => {
      const a = await kiln.api.account({ plan: 'studio', credits: 500 });
      const dir = fs.mkdtempSync(path.join(tmp, 'eco-lines-'));
      fs.writeFileSync(
        path.join(dir, 'mixed.jsonl'),
        [
          '"a plain prompt"',
          '{"prompt": "a patient prompt", "tier": "economy"}',
          '{"prompt": "another patient one", "tier": "economy"}',
          '{"prompt": "an urgent one", "tier": "standard"}',
        ].join('\n'),
      );
      // Standard by default: two prompts at 6, two at the economy 3.
      const estimate = await kilnCli(kiln, a, ['submit', 'mixed.jsonl', '--model', ECO, '--estimate', '--json'], dir);
      expect({ code: estimate.code, stderr: estimate.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(estimate.stdout)).toMatchObject({ tier: 'mixed', windowHours: 24, images: 4, batches: 2, creditsRequired: 18 });
      const human = await kilnCli(kiln, a, ['submit', 'mixed.jsonl', '--model', ECO, '--estimate'], dir);
      expect(human.stdout).toContain('credits required 18 on both tiers (the economy images within 24 h), balance 500');
      // Under --tier economy the line saying "standard" is the only standard prompt.
      const economyRun = await kilnCli(
        kiln,
        a,
        ['submit', 'mixed.jsonl', '--model', ECO, '--tier', 'economy', '--estimate', '--json'],
        dir,
      );
      expect(JSON.parse(economyRun.stdout)).toMatchObject({ tier: 'mixed', images: 4, creditsRequired: 15 });

      const run = await kilnCli(kiln, a, ['submit', 'mixed.jsonl', '--model', ECO, '--json'], dir);
      expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr }).toEqual({ code: 0, stderr: '' });
      const outcome = JSON.parse(run.stdout);
      expect(outcome).toMatchObject({ refusal: null, credits: { charged: 18 } });
      const created = await Promise.all(
        (outcome.batches as { id: string }[]).map(
          async (b) => JSON.parse((await kilnCli(kiln, a, ['status', b.id, '--json'], dir)).stdout).batch,
        ),
      );
      expect(
        created
          .map((b) => ({ tier: b.tier, total: b.total, creditsCharged: b.creditsCharged }))
          .sort((x, y) => x.tier.localeCompare(y.tier)),
      ).toEqual([
        { tier: 'economy', total: 2, creditsCharged: 6 },
        { tier: 'standard', total: 2, creditsCharged: 12 },
      ]);
      expect(await charged(a.id)).toBe(18);

      // A bad tier is a usage error naming the line (exit 2), before anything is sent.
      fs.writeFileSync(path.join(dir, 'bad.jsonl'), '"fine"\n{"prompt": "cheap please", "tier": "cheap"}\n');
      const bad = await kilnCli(kiln, a, ['submit', 'bad.jsonl', '--model', ECO], dir);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('bad.jsonl:2: "tier" must be "standard" or "economy"');
      expect(await batchCount(kiln.api, a.id)).toBe(2);
    });

    it('--tier economy on a model without it, or on a plan without economy batches: refused (exit 3), nothing charged', async () => {
      const a = await kiln.api.account({ plan: 'starter', credits: 500 });
      const dir = fs.mkdtempSync(path.join(tmp, 'eco-refused-'));
      const file = promptsFile(dir, 2);
      const noTier = await kilnCli(kiln, a, ['submit', file, '--model', MODEL, '--tier', 'economy', '--wait'], dir);
      expect(noTier.code).toBe(3);
      expect(noTier.stderr).toContain('tier_not_available');
      const badTier = await kilnCli(kiln, a, ['submit', file, '--model', ECO, '--tier', 'cheap'], dir);
      expect(badTier.code).toBe(2);
      // A plan whose economy cap is 0 would answer every create concurrent_limit_exceeded (which
      // the command otherwise waits out): refused at once instead.
      await kiln.api.admin('patch', '/v1/admin/plans/starter').send({ maxConcurrentEconomyBatches: 0 }).expect(200);
      try {
        const noSlots = await kilnCli(kiln, a, ['submit', file, '--model', ECO, '--tier', 'economy', '--wait'], dir);
        expect(noSlots.code).toBe(3);
        expect(noSlots.stderr).toContain('concurrent_limit_exceeded: The starter plan runs no economy batches');
      } finally {
        await kiln.api.admin('patch', '/v1/admin/plans/starter').send({ maxConcurrentEconomyBatches: 2 }).expect(200);
      }
      expect(await batchCount(kiln.api, a.id)).toBe(0);
      expect(await charged(a.id)).toBe(0);
    });
  });
});
