import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Kiln, KilnApiError } from '@app/sdk';
import { routeModel } from '@app/testing';
import { LiveKiln, startLiveKiln } from './helpers/live-kiln';

jest.setTimeout(180_000);

const BIN = path.resolve(__dirname, '../bin/kiln.js');
const MODEL = 'beta-2-lite'; // 3 credits an image at 1K
const OTHER_MODEL = 'eta-image';
const PASSWORD = 'correct horse battery';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `kiln ...` as a user runs it (the built bin), with only the environment given (no API key). */
function kilnCli(kiln: LiveKiln, env: Record<string, string>, args: string[]): Promise<Run> {
  if (!fs.existsSync(path.resolve(__dirname, '../dist/apps/cli/src/main.js'))) throw new Error('run "npm run build" first (npm test does)');
  const childEnv: NodeJS.ProcessEnv = { ...process.env, KILN_URL: kiln.url, ...env };
  for (const name of ['KILN_API_KEY', 'KILN_SESSION', 'KILN_PASSWORD', 'KILN_EMAIL']) if (!(name in env)) delete childEnv[name];
  const child = spawn(process.execPath, [BIN, ...args], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/** Per-key budgets and models allowlists through the SDK's `keys` and `kiln keys`, against a live Kiln. */
describe('API keys from the SDK and the command line (docs/billing.md#per-key-budgets)', () => {
  let kiln: LiveKiln;
  let restore: () => Promise<void>;

  beforeAll(async () => {
    kiln = await startLiveKiln('keys-sdk-cli');
    restore = await routeModel(kiln.api, MODEL, { type: 'simulated', latencyMs: { min: 50, max: 100 } });
  });
  afterAll(async () => {
    await restore?.();
    await kiln?.close();
  });

  /** An account holder with a password, on a plan with API keys, and credits. */
  async function holder(): Promise<{ id: string; email: string }> {
    const email = `k-${randomUUID()}@example.test`;
    const res = await fetch(`${kiln.url}/v1/dashboard/signup`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email, password: PASSWORD }),
    });
    expect(res.status).toBe(201);
    const [row] = await kiln.api.db.query(`SELECT id FROM accounts WHERE lower(email) = lower($1)`, [email]);
    await kiln.api.admin('patch', `/v1/admin/accounts/${row.id}`).send({ plan: 'studio' }).expect(200);
    await kiln.api.admin('post', `/v1/admin/accounts/${row.id}/credits`).send({ amount: 100, reason: 'test grant' }).expect(200);
    return { id: row.id, email };
  }

  const keyRows = async (accountId: string) =>
    kiln.api.db.query(
      `SELECT name, budget_credits, budget_period, credit_cap_per_day, models, revoked_at IS NOT NULL AS revoked
         FROM api_keys WHERE account_id = $1 ORDER BY created_at`,
      [accountId],
    );

  it('SDK: login, create (secret once), list, update budget and allowlist, refusals with their codes, revoke', async () => {
    const h = await holder();
    await expect(Kiln.login(h.email, 'not the password', { baseUrl: kiln.url })).rejects.toMatchObject({
      code: 'invalid_credentials',
      status: 401,
    });
    const sdk = await Kiln.login(h.email, PASSWORD, { baseUrl: kiln.url });
    expect(sdk.sessionToken).toMatch(/^kiln_sess_/);
    expect(sdk.sessionExpiresAt).toBeGreaterThan(Date.now());
    // A session is not an API key: the public API's calls need one.
    await expect(sdk.me()).rejects.toThrow(/no API key/);

    const created = await sdk.keys.create({ name: 'ci', budget: { credits: 20, period: 'week' }, models: [MODEL] });
    expect(created.secret).toMatch(/^kiln_live_/);
    expect(created.key).toMatchObject({ name: 'ci', budget: { credits: 20, period: 'week', spent: 0 }, models: [MODEL], revokedAt: null });
    const listed = await sdk.keys.list();
    expect(listed.map((k) => k.id)).toEqual([created.key.id]);
    expect(JSON.stringify(listed)).not.toContain(created.secret);

    const updated = await sdk.keys.update(created.key.id, { budget: { credits: 9, period: 'month' }, models: [MODEL, OTHER_MODEL] });
    expect(updated).toMatchObject({ budget: { credits: 9, period: 'month' }, models: [MODEL, OTHER_MODEL], creditCapPerDay: null });
    const capped = await sdk.keys.update(created.key.id, { creditCapPerDay: 7 });
    expect(capped).toMatchObject({ creditCapPerDay: 7, budget: { credits: 7, period: 'day' } });

    const badPeriod = await sdk.keys.update(created.key.id, { budget: { credits: 5, period: 'fortnight' as 'day' } }).catch((e) => e);
    expect(badPeriod).toBeInstanceOf(KilnApiError);
    expect({ code: badPeriod.code, status: badPeriod.status }).toEqual({ code: 'invalid_request', status: 400 });
    const badModel = await sdk.keys.update(created.key.id, { models: ['not a model key!'] }).catch((e) => e);
    expect({ code: badModel.code, status: badModel.status }).toEqual({ code: 'invalid_request', status: 400 });
    const unknown = await sdk.keys.update(randomUUID(), { name: 'x' }).catch((e) => e);
    expect({ code: unknown.code, status: unknown.status }).toEqual({ code: 'not_found', status: 404 });
    // The refusals changed nothing.
    expect(await keyRows(h.id)).toEqual([
      { name: 'ci', budget_credits: null, budget_period: null, credit_cap_per_day: 7, models: [MODEL, OTHER_MODEL], revoked: false },
    ]);

    const revoked = await sdk.keys.revoke(created.key.id);
    expect(revoked.revokedAt).not.toBeNull();
    await expect(new Kiln({ baseUrl: kiln.url, apiKey: created.secret }).me()).rejects.toMatchObject({ status: 401 });
    await sdk.logout();
    await expect(sdk.keys.list()).rejects.toMatchObject({ code: 'invalid_credentials', status: 401 });
  });

  it("CLI: login, keys create/list/update/revoke; a budget set by the CLI refuses the next create; bad period prints Kiln's code, exit 3", async () => {
    const h = await holder();
    const noSession = await kilnCli(kiln, {}, ['keys', 'list']);
    expect(noSession.code).toBe(2);
    expect(noSession.stderr).toContain('KILN_SESSION');

    const login = await kilnCli(kiln, { KILN_PASSWORD: PASSWORD }, ['login', '--email', h.email]);
    expect({ code: login.code, stderr: login.code === 0 ? '' : login.stderr }).toEqual({ code: 0, stderr: '' });
    const session = { KILN_SESSION: login.stdout.trim() };
    expect(session.KILN_SESSION).toMatch(/^kiln_sess_/);

    const create = await kilnCli(kiln, session, ['keys', 'create', '--name', 'ci', '--budget', '100', '--period', 'month', '--json']);
    expect(create.code).toBe(0);
    const created = JSON.parse(create.stdout);
    expect(created.key).toMatchObject({ name: 'ci', budget: { credits: 100, period: 'month' }, models: [] });
    const human = await kilnCli(kiln, session, ['keys', 'create', '--name', 'spare']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^secret kiln_live_\S+$/m);

    const table = await kilnCli(kiln, session, ['keys', 'list']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^id\s+name\s+key\s+budget/);
    expect(table.stdout).toMatch(new RegExp(`${created.key.id}\\s+ci\\s+.*0/100 a month\\s+all`));

    // A refused input: Kiln's error code on stderr, exit 3, nothing changed.
    const prefix = created.key.id.slice(0, 8);
    const bad = await kilnCli(kiln, session, ['keys', 'update', prefix, '--budget', '5', '--period', 'fortnight']);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toContain('invalid_request');
    expect(bad.stderr).toContain('period');
    const usage = await kilnCli(kiln, session, ['keys', 'update', prefix, '--budget', '5']);
    expect(usage.code).toBe(2);

    // 5 credits a day, beta-2-lite only: one image (3) fits, a second does not.
    const update = await kilnCli(kiln, session, [
      'keys',
      'update',
      prefix,
      '--budget',
      '5',
      '--period',
      'day',
      '--models',
      MODEL,
      '--json',
    ]);
    expect(update.code).toBe(0);
    expect(JSON.parse(update.stdout).key).toMatchObject({ budget: { credits: 5, period: 'day', spent: 0 }, models: [MODEL] });
    const withKey = new Kiln({ baseUrl: kiln.url, apiKey: created.secret, maxRetries: 0 });
    await withKey.batches.create({ model: MODEL, prompts: ['a red fox'] });
    const over = await withKey.batches.create({ model: MODEL, prompts: ['a lighthouse'] }).catch((e) => e);
    expect({ code: over.code, status: over.status }).toEqual({ code: 'key_budget_exceeded', status: 403 });
    expect(over.details).toMatchObject({ budget: 5, spent: 3, required: 3, period: 'day' });
    const otherModel = await withKey.batches.create({ model: OTHER_MODEL, prompts: ['a bowl of ramen'] }).catch((e) => e);
    expect({ code: otherModel.code, status: otherModel.status }).toEqual({ code: 'model_not_allowed', status: 403 });
    const spent = await kilnCli(kiln, session, ['keys', 'list', '--json']);
    expect(JSON.parse(spent.stdout).keys.find((k: { id: string }) => k.id === created.key.id).budget).toMatchObject({ spent: 3 });

    // The older spelling: --cap, a day budget answered with v1's 402.
    expect((await kilnCli(kiln, session, ['keys', 'update', prefix, '--cap', '3', '--all-models'])).code).toBe(0);
    const capped = await withKey.batches.create({ model: MODEL, prompts: ['a lighthouse'] }).catch((e) => e);
    expect({ code: capped.code, status: capped.status }).toEqual({ code: 'daily_credit_cap_exceeded', status: 402 });

    const revoke = await kilnCli(kiln, session, ['keys', 'revoke', prefix]);
    expect(revoke.code).toBe(0);
    expect(revoke.stdout).toMatch(/revoked \d{4}-/);
    await expect(withKey.me()).rejects.toMatchObject({ status: 401 });
    const gone = await kilnCli(kiln, session, ['keys', 'update', randomUUID(), '--name', 'x']);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toContain('not_found');

    expect((await kilnCli(kiln, session, ['logout'])).code).toBe(0);
    const after = await kilnCli(kiln, session, ['keys', 'list']);
    expect(after.code).toBe(3);
    expect(after.stderr).toContain('invalid_credentials');
  });
});
