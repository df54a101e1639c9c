import { getRepositoryToken } from '@nestjs/typeorm';
import { TestingModule } from '@nestjs/testing';
import { randomBytes } from 'node:crypto';
import { Repository } from 'typeorm';
import { CatalogService } from '@app/catalog';
import { buildConfig, KILN_CONFIG, KilnConfig } from '@app/config';
import { ModelEntity } from '@app/database';
import { bootTestApp, bootTestContext, TestApp } from '@app/testing';
import { ApiModule } from '../../apps/api/src/api.module';
import { configureApp } from '../../apps/api/src/app.setup';
import { GeneratorModule } from '../../apps/generator/src/generator.module';

/*
 * The apps, bound to the one test harness in libs/testing (which, being a lib, does not
 * import them).
 */

/** The real ApiModule and configureApp on the given configuration. */
export function bootApi(config: KilnConfig): Promise<TestApp> {
  return bootTestApp(ApiModule, configureApp, [[KILN_CONFIG, config]]);
}

/** The real GeneratorModule in this process, consuming from Redis as the deployed one does. */
export function bootGenerator(config: KilnConfig): Promise<TestingModule> {
  return bootTestContext(GeneratorModule, [[KILN_CONFIG, config]]);
}

/**
 * Models only the batch specs see. The seeded catalog is shared with other test files running
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
 * the caller's own, so its assertions on the task queue never see another file's jobs.
 */
export function bootBatchesApp(base: KilnConfig = buildConfig(process.env)): Promise<TestApp> {
  const config = { ...base, redisPrefix: `${base.redisPrefix}:batches-${randomBytes(4).toString('hex')}` };
  return bootTestApp(ApiModule, configureApp, [
    [KILN_CONFIG, config],
    {
      token: CatalogService,
      useFactory: (repo: Repository<ModelEntity>, c: KilnConfig) => new TestCatalogService(repo, c),
      inject: [getRepositoryToken(ModelEntity), KILN_CONFIG],
    },
  ]);
}
