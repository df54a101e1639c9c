import { NestExpressApplication } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import { getRepositoryToken } from '@nestjs/typeorm';
import { randomBytes } from 'node:crypto';
import { Repository } from 'typeorm';
import { CatalogService } from '@app/catalog';
import { buildConfig, KILN_CONFIG, KilnConfig } from '@app/config';
import { ModelEntity } from '@app/database';
import { TestAccount, TestApp } from '@app/testing';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';

/**
 * Models only these tests see. The seeded catalog is shared with other test files running
 * at the same time (one of them counts the models), so shapes the seed does not have, such
 * as a text-only model, are served by a catalog subclass instead of rows in the database.
 */
export const TEST_MODELS: Record<string, Partial<ModelEntity>> = {
  'test-text-only': { supportsRefImages: false, maxRefImages: null, creditCost: { '1K': 2 } },
};

class TestCatalogService extends CatalogService {
  constructor(private readonly repo: Repository<ModelEntity>, config: KilnConfig) {
    super(repo, config);
  }

  override async requireEnabled(key: string): Promise<ModelEntity> {
    const extra = TEST_MODELS[key];
    if (!extra) return super.requireEnabled(key);
    const base = await super.requireEnabled('eta-image');
    return { ...base, key, ...extra, resolutionsByRatio: { '1:1': ['1K'] } } as ModelEntity;
  }
}

/**
 * The real ApiModule and configureApp, with the text-only test model and a Redis prefix of
 * this file's own, so its assertions on the task queue never see another file's jobs.
 */
export async function bootBatchesApp(base: KilnConfig = buildConfig(process.env)): Promise<TestApp> {
  const config = { ...base };
  config.redisPrefix = `${config.redisPrefix}:batches-${randomBytes(4).toString('hex')}`;
  const moduleRef = await Test.createTestingModule({ imports: [ApiModule] })
    .overrideProvider(KILN_CONFIG)
    .useValue(config)
    .overrideProvider(CatalogService)
    .useFactory({
      factory: (repo: Repository<ModelEntity>, c: KilnConfig) => new TestCatalogService(repo, c),
      inject: [getRepositoryToken(ModelEntity), KILN_CONFIG],
    })
    .compile();
  const app = moduleRef.createNestApplication<NestExpressApplication>({ bodyParser: false, logger: false });
  configureApp(app);
  await app.init();
  return new TestApp(app);
}

export const bearer = (a: TestAccount) => `Bearer ${a.key}`;

export function postBatch(t: TestApp, a: TestAccount, body: unknown) {
  return t.http.post('/v1/batches').set('Authorization', bearer(a)).send(body as object);
}

export function getJson(t: TestApp, a: TestAccount, path: string) {
  return t.http.get(path).set('Authorization', bearer(a));
}

/** An upload row as POST /uploads would write it (that endpoint is tested on its own). */
export async function insertUpload(t: TestApp, accountId: string, name = 'a.png'): Promise<{ id: string; url: string }> {
  const token = randomBytes(16).toString('hex');
  const url = `http://kiln.test/files/uploads/${token}/${name}`;
  const [row] = await t.db.query(
    `INSERT INTO uploads (account_id, storage_key, url, name, content_type, bytes, width, height)
     VALUES ($1, $2, $3, $4, 'image/png', 68, 1, 1) RETURNING id`,
    [accountId, `uploads/${token}/${name}`, url, name],
  );
  return { id: row.id, url };
}

export async function batchCount(t: TestApp, accountId: string): Promise<number> {
  const [row] = await t.db.query(`SELECT count(*)::int AS n FROM batches WHERE account_id = $1`, [accountId]);
  return row.n;
}

export async function taskRows(
  t: TestApp,
  batchId: string,
): Promise<{ id: string; seq: number; prompt: string; ref_upload_ids: string[]; seed: number; status: string }[]> {
  return t.db.query(
    `SELECT id, seq, prompt, ref_upload_ids, seed, status FROM tasks WHERE batch_id = $1 ORDER BY seq`,
    [batchId],
  );
}
