import { getRepositoryToken } from '@nestjs/typeorm';
import { TestingModule } from '@nestjs/testing';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Repository } from 'typeorm';
import { CatalogService } from '@app/catalog';
import { buildConfig, KILN_CONFIG, KilnConfig } from '@app/config';
import { ModelEntity } from '@app/database';
import {
  bootTestApp,
  bootTestContext,
  ConfigOverrides,
  fileEnvironment,
  FileEnvironment,
  GeneratorProcess,
  spawnGenerator,
  TestApp,
} from '@app/testing';
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
  constructor(
    private readonly repo: Repository<ModelEntity>,
    config: KilnConfig,
  ) {
    super(repo, config);
  }

  override async requireEnabled(key: string): Promise<ModelEntity> {
    const extra = TEST_MODELS[key];
    if (!extra) return super.requireEnabled(key);
    const base = await super.requireEnabled('eta-image');
    return { ...base, key, ...extra, resolutionsByRatio: { '1:1': ['1K'] } };
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

/**
 * Locks, leases and reconcile short enough that the tasks of a SIGKILLed generator are taken
 * up by the next one within seconds: the base of the process specs' child environment.
 */
export const FAST_TAKEOVER_ENV: Record<string, string> = {
  GENERATOR_CONCURRENCY: '4',
  QUEUE_LOCK_DURATION_MS: '1000',
  QUEUE_STALLED_INTERVAL_MS: '500',
  RECONCILE_INTERVAL_MS: '1000',
  TASK_LEASE_MS: '3000',
};

/**
 * A generator child of the queue upstream specs: fast takeover, quick retries, short poll
 * leases, private addresses allowed (the fakes listen on 127.0.0.1), and every queue type's
 * key (the api refuses a route whose key a live generator lacks).
 */
export const QUEUE_CHILD_ENV: Record<string, string> = {
  ...FAST_TAKEOVER_ENV,
  TASK_MAX_ATTEMPTS: '4',
  TASK_BACKOFF_MS: '50',
  UPSTREAM_LEASE_MS: '2000',
  UPSTREAM_ALLOW_PRIVATE: 'true',
  FAL_KEY: 'fal-test:key',
  REPLICATE_API_TOKEN: 'r8_test',
  BFL_API_KEY: 'bfl-test',
};

export type ProcessExit = Awaited<GeneratorProcess['exited']>;

/**
 * A spec's Kiln with its generators as real processes (the built generator, spawnGenerator:
 * `npm run build` first): the api in this process on a database of the file's own, and
 * generators started when a test asks. Filled in by the beforeAll it registers.
 */
export interface GeneratorProcesses {
  readonly env: FileEnvironment;
  readonly config: KilnConfig;
  readonly api: TestApp;
  /** The file's own storage directory (with `ownDataDir`), removed after the file. */
  readonly dataDir: string;
  /** A generator with the spec's child environment; `extra` overrides it. */
  start(extra?: Record<string, string>): GeneratorProcess;
  /** The generators started that have not exited. */
  running(): GeneratorProcess[];
  /** Sends `signal` and resolves when the process has exited. */
  kill(g: GeneratorProcess, signal: NodeJS.Signals): Promise<ProcessExit>;
  /** Runs `fn`, printing every generator's output (its last 20 kB) if it fails. */
  withOutput(fn: () => Promise<void>): Promise<void>;
}

/**
 * Registers the beforeAll and afterAll of a process spec (call it in the describe): the file's
 * database (`overrides` on top of the run's configuration), the api booted on it, and after
 * the file every generator still running SIGKILLed and waited for before the api, database
 * and data directory go.
 */
export function useGeneratorProcesses(
  name: string,
  opts: { childEnv: Record<string, string>; overrides?: (base: KilnConfig) => ConfigOverrides; ownDataDir?: boolean },
): GeneratorProcesses {
  const children: GeneratorProcess[] = [];
  let env: FileEnvironment | undefined;
  let api: TestApp | undefined;
  let dataDir: string | undefined;
  const ready = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is set in beforeAll: use it inside a test or hook`);
    return value;
  };

  beforeAll(async () => {
    const base = buildConfig(process.env);
    const overrides = opts.overrides?.(base) ?? {};
    if (opts.ownDataDir) {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `kiln-${name.replace(/_/g, '-')}-`));
      overrides.storage = { ...base.storage, ...overrides.storage, dataDir };
    }
    env = await fileEnvironment(name, overrides);
    api = await bootApi(env.config);
  });
  const running = () => children.filter((c) => c.child.exitCode === null && c.child.signalCode === null);
  afterAll(async () => {
    for (const c of running()) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await api?.close();
    await env?.teardown();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  return {
    get env() {
      return ready(env, 'env');
    },
    get config() {
      return ready(env, 'env').config;
    },
    get api() {
      return ready(api, 'api');
    },
    get dataDir() {
      return ready(dataDir, 'dataDir (ownDataDir)');
    },
    start(extra = {}) {
      const g = spawnGenerator(ready(env, 'env').config, { ...opts.childEnv, ...extra });
      children.push(g);
      return g;
    },
    running,
    async kill(g, signal) {
      g.child.kill(signal);
      return g.exited;
    },
    async withOutput(fn) {
      try {
        await fn();
      } catch (err) {
        for (const c of children) process.stderr.write(`--- generator ${c.child.pid} output ---\n${c.output().slice(-20_000)}\n`);
        throw err;
      }
    },
  };
}
