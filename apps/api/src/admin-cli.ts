import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomBytes } from 'node:crypto';
import { AccountsModule, AccountsService } from '@app/accounts';
import { BillingModule, BillingService } from '@app/billing';
import { bootLogger, buildConfig, exitOnBootFailure, KilnConfigModule, useRuntimeEnv } from '@app/config';
import { DatabaseModule, runMigrations } from '@app/database';
import { KeysModule, KeysService } from '@app/keys';

/**
 * The operator's command line (`npm run kiln-admin`; the customer's is apps/cli), commands that
 * need no HTTP server:
 *   migrate                 apply pending migrations
 *   demo [email] [credits]  create (or reuse) a studio account and print a fresh API key
 *                           (and, the first time, a password for the web app)
 *   grant <email> <credits> add credits to an account (a `grant` ledger row)
 *   password <email>        set a new random password for an account and print it
 */
@Module({ imports: [KilnConfigModule.forRoot(), DatabaseModule.forRoot(), BillingModule, AccountsModule, KeysModule] })
class AdminCliModule {}

const DEMO_KEY_NAME = 'demo';

async function demo(email: string, credits: number): Promise<void> {
  const app = await NestFactory.createApplicationContext(AdminCliModule, { logger: ['error'] });
  try {
    const accounts = app.get(AccountsService);
    const keys = app.get(KeysService);
    const billing = app.get(BillingService);
    const existing = await accounts.findByEmail(email);
    // A password the first time, so the demo account can also sign in to the web app.
    const password = existing?.passwordHash ? null : newPassword();
    const account = existing ?? (await accounts.create({ email, plan: 'studio', credits, password: password ?? undefined }));
    if (existing && password) await accounts.setPassword(account.id, password);
    if (existing) {
      await accounts.update(account.id, { plan: 'studio', status: 'active' });
      const { balance } = await accounts.get(account.id);
      if (balance < credits) await billing.adjust(account.id, credits - balance, 'grant', 'Demo top-up');
    }
    // Each run hands out a fresh key (a secret is never kept, so the last one cannot be shown
    // again); earlier demo keys are revoked so the plan's key limit holds, and it says so.
    for (const k of await keys.list(account.id)) {
      if (k.name === DEMO_KEY_NAME && !k.revokedAt) {
        await keys.revoke(account.id, k.id);
        console.error(`Revoked the earlier demo key ${k.hint}: a shell that exported it needs this command's new KILN_API_KEY.`);
      }
    }
    const { secret } = await keys.create(account.id, { name: DEMO_KEY_NAME });
    const { balance } = await accounts.get(account.id);
    console.error(`Demo account ${email} (studio plan, ${balance} credits).`);
    if (password) console.error(`Its web app password (shown once; kiln-admin password ${email} sets another): ${password}`);
    // Exported, so `eval "$(node dist/apps/api/src/admin-cli.js demo)"` sets both for the shell and
    // for what it runs next (npx kiln reads KILN_API_KEY from its environment).
    console.log(`export KILN_API_KEY=${secret}`);
    console.log(`export ACCOUNT_ID=${account.id}`);
  } finally {
    await app.close();
  }
}

/** 18 random bytes as base64url: 24 characters, past the web app's 10-character rule. */
function newPassword(): string {
  return randomBytes(18).toString('base64url');
}

/** Runs `work` with the accounts and billing services of a short-lived application context. */
async function withAccounts(work: (accounts: AccountsService, billing: BillingService) => Promise<void>): Promise<void> {
  const app = await NestFactory.createApplicationContext(AdminCliModule, { logger: ['error'] });
  try {
    await work(app.get(AccountsService), app.get(BillingService));
  } finally {
    await app.close();
  }
}

async function accountByEmail(accounts: AccountsService, email: string | undefined) {
  const account = email ? await accounts.findByEmail(email) : null;
  if (!account) throw new Error(`No account with the email ${email ?? '(none given)'}`);
  return account;
}

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  // The database and Redis `npm start` runs on (its fallbacks included), unless set here.
  useRuntimeEnv();
  switch (command) {
    case 'migrate': {
      // JSON lines: in a container this is the migrate service's (or the api's first) log.
      const log = bootLogger.child({ context: 'Migrate' });
      const applied = await runMigrations(buildConfig().databaseUrl, {
        onWait: () => log.info('Another migration run holds the lock; waiting for it to finish'),
      });
      log.info({ applied }, applied.length ? `Applied: ${applied.join(', ')}` : 'Schema is up to date.');
      return;
    }
    case 'demo':
      return demo(args[0] ?? 'demo@kiln.local', Number(args[1] ?? 1000));
    case 'grant': {
      const credits = Number(args[1]);
      if (!Number.isInteger(credits) || credits <= 0) throw new Error('grant <email> <credits>: credits must be a positive whole number');
      return withAccounts(async (accounts, billing) => {
        const account = await accountByEmail(accounts, args[0]);
        await billing.adjust(account.id, credits, 'grant', 'Granted by the operator (kiln-admin grant)');
        console.error(`${account.email}: ${(await accounts.get(account.id)).balance} credits.`);
      });
    }
    case 'password':
      return withAccounts(async (accounts) => {
        const account = await accountByEmail(accounts, args[0]);
        const password = newPassword();
        await accounts.setPassword(account.id, password);
        console.error(`${account.email}: new web app password (shown once): ${password}`);
      });
    default:
      console.error(
        'Usage: node dist/apps/api/src/admin-cli.js <migrate | demo [email] [credits] | grant <email> <credits> | password <email>>',
      );
      process.exitCode = 2;
  }
}

main(process.argv.slice(2)).catch((err) => exitOnBootFailure(err, 'Cli'));
