import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
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
    const account = existing ?? (await accounts.create({ email, plan: 'studio', credits }));
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
    // Exported, so `eval "$(node dist/apps/api/src/admin-cli.js demo)"` sets both for the shell and
    // for what it runs next (npx kiln reads KILN_API_KEY from its environment).
    console.log(`export KILN_API_KEY=${secret}`);
    console.log(`export ACCOUNT_ID=${account.id}`);
  } finally {
    await app.close();
  }
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
    default:
      console.error('Usage: node dist/apps/api/src/admin-cli.js <migrate | demo [email] [credits]>');
      process.exitCode = 2;
  }
}

main(process.argv.slice(2)).catch((err) => exitOnBootFailure(err, 'Cli'));
