import { getQueueToken } from '@nestjs/bull';
import { TestingModule } from '@nestjs/testing';
import type { Queue } from 'bull';
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';
import sharp from 'sharp';
import { buildConfig, KilnConfig } from '@app/config';
import { BATCH_DONE_SQL, ProviderRoute, runMigrations } from '@app/database';
import { TASK_QUEUE } from '@app/tasks';
import { TestAccount, TestApp } from './test-app';

/*
 * What e2e specs share beyond booting an app (test-app.ts): a database of a file's own, the
 * built generator as a child process, requests, rows and images. The apps themselves are
 * bound in test/helpers/apps.ts, since a lib never imports an app.
 */

export type ConfigOverrides = Omit<Partial<KilnConfig>, 'generator'> & { generator?: Partial<KilnConfig['generator']> };

export interface FileEnvironment {
  config: KilnConfig;
  /** Drops the file's database; call it after closing every app and child using it. */
  teardown: () => Promise<void>;
}

/**
 * A database and a Redis prefix of this file's own. Generators reconcile the whole
 * database against their queue, so on the run's shared database one file's generator
 * would adopt the tasks other files leave queued on purpose (and route edits to seeded
 * models would leak between files). Own prefix: its queue holds only its own jobs.
 */
export async function fileEnvironment(name: string, overrides: ConfigOverrides = {}): Promise<FileEnvironment> {
  const adminUrl = process.env.KILN_TEST_ADMIN_URL as string;
  const dbName = `${process.env.KILN_TEST_DB_NAME}_${name.replace(/[^a-z0-9_]/gi, '_')}`.slice(0, 63);
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${dbName}"`);
  } finally {
    await admin.end();
  }
  // Through the pooler in `npm run test:pgbouncer`; creating and dropping stay direct.
  const url = new URL(process.env.TEST_DATABASE_POOLER_URL || adminUrl);
  url.pathname = `/${dbName}`;
  await runMigrations(url.toString());

  const base = buildConfig(process.env);
  const { generator, ...rest } = overrides;
  const config: KilnConfig = {
    ...base,
    ...rest,
    databaseUrl: url.toString(),
    redisPrefix: `${base.redisPrefix}:${name}-${randomBytes(3).toString('hex')}`,
    generator: { ...base.generator, ...generator },
  };
  return {
    config,
    teardown: async () => {
      if (process.env.KILN_KEEP_TEST_DB) return;
      const c = new Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Another configuration on the same database as `config` but a Redis prefix of its own. */
export function withOwnPrefix(config: KilnConfig, name: string, generator: Partial<KilnConfig['generator']> = {}): KilnConfig {
  return {
    ...config,
    redisPrefix: `${buildConfig(process.env).redisPrefix}:${name}-${randomBytes(3).toString('hex')}`,
    generator: { ...config.generator, ...generator },
  };
}

export function queueOf(moduleRef: { get: TestingModule['get'] }): Queue {
  return moduleRef.get<Queue>(getQueueToken(TASK_QUEUE), { strict: false });
}

export const bearer = (a: TestAccount) => `Bearer ${a.key}`;

/** POST /v1/batches as the account's key; the response, to assert on. */
export function postBatch(t: TestApp, a: TestAccount, body: unknown) {
  return t.http
    .post('/v1/batches')
    .set('Authorization', bearer(a))
    .send(body as object);
}

/** GET a path as the account's key; the response, to assert on. */
export function getJson(t: TestApp, a: TestAccount, path: string) {
  return t.http.get(path).set('Authorization', bearer(a));
}

/** POST /v1/batches; returns the batch id. */
export async function createBatch(t: TestApp, a: TestAccount, body: Record<string, unknown>): Promise<string> {
  const res = await t.http.post('/v1/batches').set('Authorization', bearer(a)).send(body);
  if (res.status !== 201) throw new Error(`POST /v1/batches answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

export async function getBatch(t: TestApp, a: TestAccount, id: string): Promise<{ batch: any; tasks: any[] }> {
  const res = await t.http.get(`/v1/batches/${id}`).set('Authorization', bearer(a));
  if (res.status !== 200) throw new Error(`GET /v1/batches/${id} answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Calls `probe` every `everyMs` until it answers a truthy value (at once or as a promise), which it returns. */
export async function waitFor<T>(
  what: string,
  probe: () => T | null | undefined | false | Promise<T | null | undefined | false>,
  timeoutMs = 30_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Polls the database (not the rate-limited API) until no task of the batch is unfinished. */
export async function waitForBatchDone(t: TestApp, batchId: string, timeoutMs = 30_000): Promise<void> {
  await waitFor(
    `batch ${batchId} to be done`,
    async () => {
      const [row] = await t.db.query(
        `SELECT count(*) FILTER (WHERE status IN ('pending', 'queued', 'running'))::int AS open,
                (SELECT ${BATCH_DONE_SQL} FROM batches WHERE id = $1) AS done
           FROM tasks WHERE batch_id = $1`,
        [batchId],
      );
      return row.open === 0 && row.done === true;
    },
    timeoutMs,
  );
}

/** A task row as node-postgres returns it: the columns tests read most, and the rest. */
export type TaskRow = { id: string; seq: number; prompt: string; ref_upload_ids: string[]; seed: number; status: string } & Record<
  string,
  any
>;

/** The batch's task rows in fan-out order. */
export async function taskRows(t: TestApp, batchId: string): Promise<TaskRow[]> {
  return t.db.query(`SELECT * FROM tasks WHERE batch_id = $1 ORDER BY seq`, [batchId]);
}

export async function batchCount(t: TestApp, accountId: string): Promise<number> {
  const [row] = await t.db.query(`SELECT count(*)::int AS n FROM batches WHERE account_id = $1`, [accountId]);
  return row.n;
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

export async function batchRow(t: TestApp, batchId: string): Promise<any> {
  const [row] = await t.db.query(`SELECT * FROM batches WHERE id = $1`, [batchId]);
  return row;
}

export async function refundRows(t: TestApp, batchId: string): Promise<{ task_id: string; amount: string }[]> {
  return t.db.query(`SELECT task_id, amount FROM ledger_entries WHERE batch_id = $1 AND kind = 'task_refund'`, [batchId]);
}

/** GET a public file URL through the api app (local storage serves /files/<key>). */
export async function download(t: TestApp, url: string): Promise<{ status: number; type: string; body: Buffer }> {
  const res = await t.http
    .get(new URL(url).pathname)
    .buffer(true)
    .parse((r, cb) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => cb(null, Buffer.concat(chunks)));
    });
  return { status: res.status, type: String(res.headers['content-type'] ?? ''), body: res.body as Buffer };
}

/** Routes a seeded model (admin API); returns a function that puts it back on builtin. */
export async function routeModel(t: TestApp, key: string, provider: ProviderRoute): Promise<() => Promise<void>> {
  const res = await t.admin('patch', `/v1/admin/models/${key}`).send({ provider });
  if (res.status !== 200) throw new Error(`PATCH /v1/admin/models/${key} answered ${res.status}: ${JSON.stringify(res.body)}`);
  return async () => {
    await t
      .admin('patch', `/v1/admin/models/${key}`)
      .send({ provider: { type: 'builtin' } })
      .expect(200);
  };
}

/**
 * Creates a batch of `model` with the model routed only while the batch is created
 * (routeModel, then put back): the batch keeps that route as its snapshot.
 */
export async function createBatchVia(
  t: TestApp,
  a: TestAccount,
  model: string,
  provider: ProviderRoute,
  body: Record<string, unknown>,
): Promise<string> {
  const restore = await routeModel(t, model, provider);
  try {
    return await createBatch(t, a, { model, ...body });
  } finally {
    await restore();
  }
}

/** POST /v1/uploads with one image; returns its public URL. */
export async function upload(t: TestApp, a: TestAccount, image: Buffer, name: string): Promise<string> {
  const res = await t.http.post('/v1/uploads').set('Authorization', bearer(a)).attach('file', image, name);
  if (res.status !== 200) throw new Error(`POST /v1/uploads answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.files[0].url as string;
}

export function solidPng(width: number, height: number, rgb: { r: number; g: number; b: number }): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: rgb } })
    .png()
    .toBuffer();
}

/** Pixels within `tolerance` of the colour in an image (any format sharp reads). */
export async function countColour(image: Buffer, rgb: { r: number; g: number; b: number }, tolerance = 12): Promise<number> {
  const { data, info } = await sharp(image).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  let n = 0;
  for (let i = 0; i < data.length; i += info.channels) {
    if (Math.abs(data[i] - rgb.r) <= tolerance && Math.abs(data[i + 1] - rgb.g) <= tolerance && Math.abs(data[i + 2] - rgb.b) <= tolerance)
      n++;
  }
  return n;
}

/** RGBA of one pixel. */
export async function pixelAt(image: Buffer, x: number, y: number): Promise<[number, number, number, number]> {
  const { data, info } = await sharp(image).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const i = (y * info.width + x) * 4;
  return [data[i], data[i + 1], data[i + 2], data[i + 3]];
}

export const GENERATOR_MAIN = path.resolve(__dirname, '../../../dist/apps/generator/src/main.js');

export interface GeneratorProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

/**
 * The built generator (`npm run build`) as its own process, on the run's database and the
 * given configuration's Redis prefix. Extra environment variables override.
 */
export function spawnGenerator(config: KilnConfig, env: Record<string, string>): GeneratorProcess {
  if (!fs.existsSync(GENERATOR_MAIN)) {
    throw new Error(`${GENERATOR_MAIN} is missing: run "npm run build" first (npm test does)`);
  }
  const child = spawn(process.execPath, [GENERATOR_MAIN], {
    env: {
      ...process.env,
      DATABASE_URL: config.databaseUrl,
      REDIS_URL: config.redisUrl,
      REDIS_PREFIX: config.redisPrefix,
      DATA_DIR: config.storage.dataDir,
      PUBLIC_BASE_URL: config.publicBaseUrl,
      // Printed only when a test fails (see withOutput in the spec).
      LOG_LEVEL: process.env.KILN_TEST_CHILD_LOG_LEVEL ?? 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  return { child, output: () => out, exited };
}
