import { INestApplication, ModuleMetadata } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Test, TestingModule } from '@nestjs/testing';
import { Logger } from 'nestjs-pino';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent';
import { DataSource } from 'typeorm';

export const ADMIN_TOKEN = () => process.env.ADMIN_TOKEN as string;

export interface TestAccount {
  id: string;
  email: string;
  key: string;
  keyId: string;
}

type RootModule = NonNullable<ModuleMetadata['imports']>[number];

/** A provider replaced by token: with a value, or built by a factory from other providers. */
export type ProviderOverride =
  [token: unknown, value: unknown] | { token: unknown; useFactory: (...deps: any[]) => unknown; inject: unknown[] };

function compile(rootModule: RootModule, overrides: ProviderOverride[]): Promise<TestingModule> {
  const builder = Test.createTestingModule({ imports: [rootModule] });
  for (const o of overrides) {
    if (Array.isArray(o)) builder.overrideProvider(o[0]).useValue(o[1]);
    else builder.overrideProvider(o.token).useFactory({ factory: o.useFactory, inject: o.inject as never[] });
  }
  return builder.compile();
}

/**
 * Boots a module (normally the real ApiModule) through `configure` (normally the real
 * configureApp), against the run's own database and Redis prefix. `overrides` replace
 * providers by token (a KILN_CONFIG of the test's own, limits, a catalog, ...).
 */
export async function bootTestApp(
  rootModule: RootModule,
  configure: (app: NestExpressApplication) => unknown,
  overrides: ProviderOverride[] = [],
): Promise<TestApp> {
  const moduleRef = await compile(rootModule, overrides);
  const app = moduleRef.createNestApplication<NestExpressApplication>({ bodyParser: false, logger: false });
  configure(app);
  await app.init();
  return new TestApp(app);
}

/**
 * Boots a module without HTTP (normally the real GeneratorModule, which then consumes from
 * Redis as the deployed one does), logging through its own pino logger.
 */
export async function bootTestContext(rootModule: RootModule, overrides: ProviderOverride[] = []): Promise<TestingModule> {
  const moduleRef = await compile(rootModule, overrides);
  moduleRef.useLogger(moduleRef.get(Logger));
  await moduleRef.init();
  return moduleRef;
}

export class TestApp {
  constructor(readonly app: INestApplication) {}

  get http(): TestAgent {
    return request(this.app.getHttpServer());
  }

  get db(): DataSource {
    return this.app.get(DataSource);
  }

  admin(method: 'get' | 'post' | 'patch' | 'delete', path: string) {
    return this.http[method](path).set('Authorization', `Bearer ${ADMIN_TOKEN()}`);
  }

  /** A fresh account with its own key, so tests never share data. */
  async account(opts: { plan?: string; credits?: number; scopes?: string[]; creditCapPerDay?: number | null } = {}): Promise<TestAccount> {
    const email = `t-${randomUUID()}@example.test`;
    const created = await this.admin('post', '/v1/admin/accounts')
      .send({ email, plan: opts.plan ?? 'studio', credits: opts.credits ?? 1000 })
      .expect(201);
    const id = created.body.account.id as string;
    const keyBody: Record<string, unknown> = {};
    if (opts.scopes) keyBody.scopes = opts.scopes;
    if (opts.creditCapPerDay !== undefined) keyBody.creditCapPerDay = opts.creditCapPerDay;
    const key = await this.admin('post', `/v1/admin/accounts/${id}/keys`).send(keyBody).expect(201);
    return { id, email, key: key.body.secret, keyId: key.body.key.id };
  }

  async balance(accountId: string): Promise<number> {
    const [row] = await this.db.query(`SELECT balance FROM accounts WHERE id = $1`, [accountId]);
    return Number(row.balance);
  }

  /** Balance and the ledger's sum must always agree. */
  async ledgerSum(accountId: string): Promise<number> {
    const [row] = await this.db.query(`SELECT COALESCE(SUM(amount), 0) AS sum FROM ledger_entries WHERE account_id = $1`, [accountId]);
    return Number(row.sum);
  }

  async close(): Promise<void> {
    await this.app.close();
  }
}
