import { ChildProcess, spawn } from 'node:child_process';
import * as path from 'node:path';
import { KilnConfig } from '@app/config';
import { fileEnvironment, FileEnvironment, GENERATOR_MAIN, TestApp, waitFor } from '@app/testing';
import { bootApi } from './helpers/apps';
import { freePort, PrivateRedis } from './helpers/private-redis';

const API_MAIN = path.resolve(__dirname, '../dist/apps/api/src/main.js');
const ADMIN = `Bearer ${process.env.ADMIN_TOKEN}`;

interface Run {
  child: ChildProcess;
  lines: () => Record<string, any>[];
  raw: () => string;
  exited: Promise<{ code: number | null; ms: number }>;
}

/** The built app with the given environment (on top of this file's database and Redis prefix). */
function run(main: string, config: KilnConfig, env: Record<string, string>): Run {
  const started = Date.now();
  const child = spawn(process.execPath, [main], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      DATABASE_URL: config.databaseUrl,
      REDIS_URL: config.redisUrl,
      REDIS_PREFIX: config.redisPrefix,
      DATA_DIR: config.storage.dataDir,
      PUBLIC_BASE_URL: 'https://kiln.example.com',
      ADMIN_TOKEN: process.env.ADMIN_TOKEN as string,
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; ms: number }>((resolve) =>
    child.once('exit', (code) => resolve({ code, ms: Date.now() - started })),
  );
  // Every line must be JSON: JSON.parse throws on anything else.
  const lines = () =>
    out
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Record<string, any>);
  return { child, lines, raw: () => out, exited };
}

/**
 * The bound is the process's own: it gives up within 10 s of its start (uptimeMs in its last
 * line). The wall clock around the spawn gets a generous margin for a loaded test machine,
 * where loading the code alone can take seconds.
 */
function expectWithinTenSeconds(uptimeMs: number, wallMs: number): void {
  expect(uptimeMs).toBeLessThan(10_000);
  expect(wallMs).toBeLessThan(30_000);
}

jest.setTimeout(120_000);

describe('boot: configuration errors, unreachable dependencies; Redis outages at run time', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  const runs: Run[] = [];
  const start = (main: string, extra: Record<string, string>) => {
    const r = run(main, config, extra);
    runs.push(r);
    return r;
  };

  beforeAll(async () => {
    env = await fileEnvironment('boot');
    config = env.config;
  });
  afterAll(async () => {
    for (const r of runs) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    await Promise.all(runs.map((r) => r.exited));
    await env?.teardown();
  });

  it.each([
    ['api', { PORT: 'abc' }, ['  PORT="abc": must be an integer number']],
    [
      'generator',
      { GENERATOR_CONCURRENCY: '0', MINIO_USE_SSL: 'maybe' },
      ['  MINIO_USE_SSL="maybe": must be a boolean value', '  GENERATOR_CONCURRENCY="0": must not be less than 1'],
    ],
    ['api', { STORAGE_DRIVER: 'minio' }, ['  STORAGE_DRIVER="minio": needs MINIO_ACCESS_KEY and MINIO_SECRET_KEY']],
    ['api', { TRUST_PROXY: '10.0.0.0/99' }, [expect.stringMatching(/^ {2}TRUST_PROXY=/)]],
  ])('%s with %j: exit 1, one JSON block naming variable, value and rule, no stack', async (app, extra, expected) => {
    const r = start(app === 'api' ? API_MAIN : GENERATOR_MAIN, extra);
    const { code } = await r.exited;
    expect(code).toBe(1);
    const lines = r.lines();
    const fatal = lines.filter((l) => l.level === 60);
    expect(fatal).toHaveLength(1);
    expect(lines.filter((l) => l.level >= 50)).toEqual(fatal);
    expect(fatal[0].msg.split('\n')).toEqual(['Invalid Kiln configuration:', ...expected]);
    expect(fatal[0].stack).toBeUndefined();
    expect(r.raw()).not.toMatch(/\n\s+at /);
  });

  it('the generator stops within 10 s naming the host and the cause when Redis is unreachable', async () => {
    const port = await freePort();
    const r = start(GENERATOR_MAIN, { REDIS_URL: `redis://127.0.0.1:${port}` });
    const { code, ms } = await r.exited;
    expect(code).toBe(1);
    const fatal = r.lines().find((l) => l.level === 60)!;
    expectWithinTenSeconds(fatal.uptimeMs, ms);
    expect(fatal).toMatchObject({ service: 'Redis', host: `127.0.0.1:${port}`, cause: expect.stringContaining('ECONNREFUSED') });
    expect(fatal.stack).toBeUndefined();
  });

  it.each(['api', 'generator'])('the %s stops within 10 s naming the host and the cause when PostgreSQL is unreachable', async (app) => {
    const port = await freePort();
    const r = start(app === 'api' ? API_MAIN : GENERATOR_MAIN, { DATABASE_URL: `postgres://kiln:secret@127.0.0.1:${port}/kiln` });
    const { code, ms } = await r.exited;
    expect(code).toBe(1);
    const fatal = r.lines().find((l) => l.level === 60)!;
    expectWithinTenSeconds(fatal.uptimeMs, ms);
    expect(fatal).toMatchObject({ service: 'PostgreSQL', host: `127.0.0.1:${port}`, cause: expect.stringContaining('ECONNREFUSED') });
    expect(r.raw()).not.toContain('secret');
  });

  it('the api without Redis at boot starts NOT READY, says so, warns about look-alike variables, and its Redis routes answer 503 within 2 s', async () => {
    const port = await freePort();
    const redisPort = await freePort();
    const r = start(API_MAIN, { PORT: String(port), REDIS_URL: `redis://127.0.0.1:${redisPort}`, GENERATOR_CONCURENCY: '3' });
    const base = `http://127.0.0.1:${port}`;
    await waitFor('the api to listen', async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok ?? null, 30_000, 100);
    // The line is written right after listen, through pino's asynchronous destination: on a
    // loaded machine /healthz may answer before it reaches the pipe, so it is waited for.
    const notReady = await waitFor(
      'the NOT READY line',
      () => r.lines().find((l) => l.level === 50 && /Started NOT READY: Redis at 127\.0\.0\.1:\d+ is not reachable/.test(l.msg)),
      10_000,
      50,
    );
    expect(notReady).toBeDefined();
    expect(
      r
        .lines()
        .find(
          (l) =>
            l.level === 40 &&
            l.msg.includes('GENERATOR_CONCURENCY is not a Kiln variable and is ignored; did you mean GENERATOR_CONCURRENCY?'),
        ),
    ).toBeDefined();
    expect((await fetch(`${base}/readyz`)).status).toBe(503);
    for (const route of ['/v1/admin/models', '/v1/admin/queues']) {
      const t0 = Date.now();
      const res = await fetch(`${base}${route}`, { headers: { Authorization: ADMIN } });
      expect(Date.now() - t0).toBeLessThan(2000);
      expect(res.status).toBe(503);
      expect((await res.json()).error.code).toBe('service_unavailable');
    }
    const t0 = Date.now();
    const metrics = await fetch(`${base}/metrics`, { headers: { Authorization: ADMIN } });
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/kiln_metrics_collect_failures_total\{source="redis"\} [1-9]/);
  });

  describe('Redis lost at run time', () => {
    let redis: PrivateRedis;
    let api: TestApp;
    beforeAll(async () => {
      redis = await PrivateRedis.start();
      api = await bootApi({ ...config, redisUrl: redis.url });
    });
    afterAll(async () => {
      await api?.close();
      await redis?.kill();
    });

    it.each([
      ['killed', (r: PrivateRedis) => r.kill()],
      ['frozen', (r: PrivateRedis) => Promise.resolve(r.freeze())],
    ])('Redis %s: admin routes that read it answer 503 within 2 s, /metrics still answers', async (_how, stop) => {
      await api.admin('get', '/v1/admin/models').expect(200);
      await stop(redis);
      try {
        for (const route of ['/v1/admin/models', '/v1/admin/queues']) {
          const t0 = Date.now();
          const res = await api.admin('get', route);
          expect(Date.now() - t0).toBeLessThan(2000);
          expect(res.status).toBe(503);
        }
        const t0 = Date.now();
        await api.http.get('/metrics').set('Authorization', ADMIN).expect(200);
        expect(Date.now() - t0).toBeLessThan(2000);
      } finally {
        redis.thaw();
        if (_how === 'killed') await redis.restart();
      }
      await waitFor(
        'the api to find Redis again',
        async () => ((await api.admin('get', '/v1/admin/models')).status === 200 ? true : null),
        15_000,
        100,
      );
    });
  });
});
