import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { fileEnvironment, FileEnvironment } from '@app/testing';

const run = promisify(execFile);
const CLI = path.resolve(__dirname, '../dist/apps/api/src/admin-cli.js');

/** The operator's command line (npm run kiln-admin) against a database of this file's own. */
describe('kiln-admin: demo, grant, password', () => {
  let env: FileEnvironment;
  let db: Client;
  const cli = (...args: string[]) =>
    run(process.execPath, [CLI, ...args], {
      env: { ...process.env, DATABASE_URL: env.config.databaseUrl, REDIS_URL: env.config.redisUrl },
    });

  beforeAll(async () => {
    env = await fileEnvironment('admincli');
    db = new Client({ connectionString: env.config.databaseUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await env?.teardown();
  });

  it('demo prints a web app password the first time only; password sets a new one; grant adds a grant row', async () => {
    const first = await cli('demo', 'demo@kiln.test', '100');
    expect(first.stdout).toMatch(/^export KILN_API_KEY=kiln_live_/m);
    const password = /Its web app password .*: (\S+)$/m.exec(first.stderr)?.[1];
    expect(password).toHaveLength(24);
    const [{ password_hash: hash }] = (await db.query(`SELECT password_hash FROM accounts WHERE email = 'demo@kiln.test'`)).rows;
    expect(hash).toBeTruthy();

    const again = await cli('demo', 'demo@kiln.test', '100');
    expect(again.stderr).not.toMatch(/password/);
    expect((await db.query(`SELECT password_hash FROM accounts WHERE email = 'demo@kiln.test'`)).rows[0].password_hash).toBe(hash);

    const reset = await cli('password', 'demo@kiln.test');
    expect(reset.stderr).toMatch(/new web app password \(shown once\): \S{24}$/m);
    expect((await db.query(`SELECT password_hash FROM accounts WHERE email = 'demo@kiln.test'`)).rows[0].password_hash).not.toBe(hash);

    await cli('grant', 'demo@kiln.test', '250');
    const { rows } = await db.query(
      `SELECT a.balance::int AS balance, (SELECT sum(amount)::int FROM ledger_entries l WHERE l.account_id = a.id) AS ledger,
              (SELECT count(*)::int FROM ledger_entries l WHERE l.account_id = a.id AND l.kind = 'grant' AND l.amount = 250) AS grants
         FROM accounts a WHERE email = 'demo@kiln.test'`,
    );
    expect(rows[0]).toEqual({ balance: 350, ledger: 350, grants: 1 });
  });

  it('grant refuses an unknown email or a bad amount, changing nothing', async () => {
    // A refusal exits non-zero and says why (the boot logger writes it).
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => 'exited 0',
        (e: { code: number; stdout: string; stderr: string }) => `${e.code}: ${e.stdout}${e.stderr}`,
      );
    expect(await refusal(cli('grant', 'nobody@kiln.test', '10'))).toMatch(/^1: .*No account with the email/s);
    expect(await refusal(cli('grant', 'demo@kiln.test', '-5'))).toMatch(/^1: .*positive whole number/s);
    expect((await db.query(`SELECT balance::int AS b FROM accounts WHERE email = 'demo@kiln.test'`)).rows[0].b).toBe(350);
  });
});
