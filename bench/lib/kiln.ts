import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { promisify } from 'node:util';
import Redis from 'ioredis';
import { Client, Pool } from 'pg';
import { NodeChild } from './children';
import { log, sleep, waitFor } from './util';

/**
 * glibc settings the generator is deployed with (docker/Dockerfile, scripts/start.sh): two
 * malloc arenas, and the mmap threshold fixed at glibc's default of 128 KiB. Without the
 * latter, glibc raises the threshold to the size of each large buffer freed (up to 32 MiB),
 * so libvips' later image buffers come from the arenas and stay resident after a 4K render
 * (bench/findings.md, 2026-11-25).
 */
export const GENERATOR_MALLOC_ENV = { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '131072' } as const;

/**
 * Node flags the generator is deployed with (docker/Dockerfile, scripts/start.sh). A set old
 * space limit makes V8 grow the heap by a small factor over what is live (about 1.4 under
 * 1 GiB) instead of up to 4x: the economy path's garbage (50,000 results read and stored) had
 * the heap at 340 MB over ~70 MB live. 512 MB is five times the most seen live (bench/findings.md,
 * 2026-11-25, economy).
 */
export const GENERATOR_NODE_ARGS = ['--max-old-space-size=512'] as const;

/**
 * The api's, as deployed: the same limit. Serving polls at full speed, V8 grew its heap to
 * ~470 MB over ~55 MB live without it (bench/findings.md, 2026-11-28 session 2); and a 32 MB
 * semi-space, without which its young generation grew to 128 MB (session 6).
 */
export const API_NODE_ARGS = ['--max-old-space-size=512', '--max-semi-space-size=32'] as const;

export interface StackOptions {
  repoRoot: string;
  /** Any database on the PostgreSQL server to use; the bench creates its own beside it. */
  serverDatabaseUrl: string;
  redisUrl: string;
  /** Temporary directory of this run: logs, DATA_DIR, profiles. */
  runDir: string;
  logLevel: string;
  /** Preload the profiler into Kiln's processes (see profiler-preload.ts). */
  profile: boolean;
  apiEnv?: Record<string, string>;
  generatorEnv?: Record<string, string>;
}

export interface BenchAccount {
  id: string;
  email: string;
  key: string;
}

export interface ApiResponse<T = unknown> {
  status: number;
  body: T;
}

const execFileAsync = promisify(execFile);

/**
 * One Kiln of the bench's own: a fresh database on the server, a fresh Redis prefix, a
 * temporary DATA_DIR, an ADMIN_TOKEN and a free port; the api and generator run from dist
 * as child processes. `teardown()` stops them, drops the database and deletes the keys.
 */
export class KilnStack {
  readonly id = `${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}_${process.pid}`;
  readonly dbName = `kiln_bench_${this.id}`;
  private readonly webhookSecretKey = randomBytes(32).toString('base64');
  readonly redisPrefix = `kiln-bench-${this.id}`;
  /** Prefix for the raw-bull baselines: same Redis, keys apart from Kiln's. */
  readonly rawPrefix = `${this.redisPrefix}-raw`;
  readonly adminToken = randomBytes(24).toString('base64url');
  readonly databaseUrl: string;
  readonly dataDir: string;
  readonly logDir: string;
  readonly profileDir: string;
  port = 0;
  api: NodeChild | null = null;
  generator: NodeChild | null = null;
  /** Generators started beside `generator` by addGenerator. */
  private readonly extraGenerators: NodeChild[] = [];
  /** The bench's own connections to Kiln's database (setup, completion polling). */
  db!: Pool;
  private generatorRuns = 0;
  private accountSeq = 0;
  private created = false;

  constructor(readonly opts: StackOptions) {
    this.databaseUrl = withDatabase(opts.serverDatabaseUrl, this.dbName);
    this.dataDir = path.join(opts.runDir, 'data');
    this.logDir = path.join(opts.runDir, 'logs');
    this.profileDir = path.join(opts.runDir, 'profiles');
    for (const dir of [this.dataDir, this.logDir, this.profileDir]) fs.mkdirSync(dir, { recursive: true });
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  distPath(...parts: string[]): string {
    return path.join(this.opts.repoRoot, 'dist', ...parts);
  }

  async setup(): Promise<void> {
    const admin = new Client({ connectionString: withDatabase(this.opts.serverDatabaseUrl, 'postgres') });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(this.dbName)}`);
      this.created = true;
    } finally {
      await admin.end();
    }
    log(`database ${this.dbName}, Redis prefix ${this.redisPrefix}, run dir ${this.opts.runDir}`);
    await execFileAsync(process.execPath, [this.distPath('apps/api/src/admin-cli.js'), 'migrate'], {
      env: this.env(),
      cwd: this.opts.repoRoot,
    });
    this.db = new Pool({ connectionString: this.databaseUrl, max: 4 });
    this.port = await freePort();
    await this.startApi();
  }

  /** The environment of Kiln's processes: Kiln's defaults except what isolates this run. */
  env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    return {
      ...process.env,
      NODE_ENV: 'production',
      PORT: String(this.port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${this.port || 8080}`,
      DATABASE_URL: this.databaseUrl,
      REDIS_URL: this.opts.redisUrl,
      REDIS_PREFIX: this.redisPrefix,
      ADMIN_TOKEN: this.adminToken,
      STORAGE_DRIVER: 'local',
      DATA_DIR: this.dataDir,
      LOG_LEVEL: this.opts.logLevel,
      // The webhooks scenario's receiver is on 127.0.0.1; a key of this run's own seals its secrets.
      WEBHOOK_SECRET_KEY: this.webhookSecretKey,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      // The rate-limited and upstream-queue scenarios' fake upstreams are on 127.0.0.1 too.
      UPSTREAM_ALLOW_PRIVATE: 'true',
      OPENAI_API_KEY: 'sk-bench-fake-upstream',
      FAL_KEY: 'bench-fal-key',
      ...extra,
    };
  }

  private execArgv(label: string): { execArgv: string[]; env: Record<string, string> } {
    if (!this.opts.profile) return { execArgv: [], env: {} };
    return {
      execArgv: ['-r', this.distPath('bench/lib/profiler-preload.js')],
      env: { KILN_BENCH_PROFILE_DIR: this.profileDir, KILN_BENCH_PROFILE_LABEL: label },
    };
  }

  async startApi(): Promise<void> {
    const prof = this.execArgv('api');
    this.api = NodeChild.start({
      name: 'api',
      script: this.distPath('apps/api/src/main.js'),
      env: this.env({ ...this.opts.apiEnv, ...prof.env }),
      execArgv: [...API_NODE_ARGS, ...prof.execArgv],
      logFile: path.join(this.logDir, 'api.log'),
    });
    await waitFor(
      'the api to answer /readyz',
      async () => {
        if (!this.api?.running) throw new Error(`the api exited; see ${this.api?.logFile}`);
        const res = await fetch(`${this.baseUrl}/readyz`).catch(() => null);
        return res?.ok ? true : undefined;
      },
      60_000,
      200,
    );
  }

  /** Stops the api and starts it again with `extra` environment (none: as at setup), on the same port. */
  async restartApi(extra: Record<string, string> = {}): Promise<void> {
    await this.api?.stop();
    const apiEnv = this.opts.apiEnv;
    this.opts.apiEnv = { ...apiEnv, ...extra };
    try {
      await this.startApi();
    } finally {
      this.opts.apiEnv = apiEnv;
    }
  }

  /**
   * Starts a generator with `extra` environment (replacing a running one). It is ready when
   * a first batch completes, which is the caller's warm-up; `stopGenerator` drains it.
   */
  async startGenerator(extra: Record<string, string> = {}): Promise<NodeChild> {
    await this.stopGenerator();
    this.generator = await this.spawnGenerator(extra);
    return this.generator;
  }

  /** One more generator beside the running one (scenarios with replicas); stopGenerator stops it too. */
  async addGenerator(extra: Record<string, string> = {}): Promise<NodeChild> {
    const generator = await this.spawnGenerator(extra);
    this.extraGenerators.push(generator);
    return generator;
  }

  private async spawnGenerator(extra: Record<string, string>): Promise<NodeChild> {
    this.generatorRuns += 1;
    const label = `generator${this.generatorRuns}`;
    const prof = this.execArgv(label);
    const script = this.distPath('apps/generator/src/main.js');
    if (!fs.existsSync(script)) throw new Error(`${script} is missing: the generator is not built`);
    const generator = NodeChild.start({
      name: label,
      script,
      // As deployed: docker/Dockerfile and scripts/start.sh give the generator two malloc
      // arenas and a fixed mmap threshold. An empty value (the memory scenario's diagnostic)
      // leaves glibc's default.
      env: withoutEmpty(
        this.env({ ...GENERATOR_MALLOC_ENV, ...extra, ...this.opts.generatorEnv, ...prof.env }),
        ...Object.keys(GENERATOR_MALLOC_ENV),
      ),
      execArgv: [...GENERATOR_NODE_ARGS, ...prof.execArgv],
      logFile: path.join(this.logDir, `${label}.log`),
    });
    // A generator that dies on boot (bad config) should fail fast, not time out a scenario.
    const died = generator.exited.then((code) => {
      throw new Error(`${label} exited (${code}) on start; see ${generator.logFile}`);
    });
    await Promise.race([died, sleep(1500)]);
    died.catch(() => undefined);
    return generator;
  }

  async stopGenerator(): Promise<void> {
    const running = [...(this.generator ? [this.generator] : []), ...this.extraGenerators.splice(0)];
    await Promise.all(running.map((g) => g.stop(30_000)));
    this.generator = null;
  }

  async teardown(keepDatabase: boolean): Promise<void> {
    await this.stopGenerator().catch(() => undefined);
    await this.api?.stop().catch(() => undefined);
    await this.db?.end().catch(() => undefined);
    await this.deleteRedisKeys().catch((err: Error) => log(`could not delete Redis keys: ${err.message}`));
    if (this.created && !keepDatabase) {
      const admin = new Client({ connectionString: withDatabase(this.opts.serverDatabaseUrl, 'postgres') });
      await admin.connect();
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${admin.escapeIdentifier(this.dbName)} WITH (FORCE)`);
      } finally {
        await admin.end();
      }
    }
    if (!keepDatabase) fs.rmSync(this.dataDir, { recursive: true, force: true });
  }

  private async deleteRedisKeys(): Promise<void> {
    const redis = new Redis(this.opts.redisUrl, { maxRetriesPerRequest: 2 });
    try {
      // Both Kiln's prefix and the raw baselines' start with redisPrefix.
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${this.redisPrefix}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await redis.unlink(...keys);
      } while (cursor !== '0');
    } finally {
      redis.disconnect();
    }
  }

  // --- HTTP -----------------------------------------------------------------------------

  async request<T = unknown>(method: string, urlPath: string, token: string, body?: unknown): Promise<ApiResponse<T>> {
    const res = await fetch(`${this.baseUrl}${urlPath}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
  }

  async admin<T = unknown>(method: string, urlPath: string, body?: unknown): Promise<T> {
    const res = await this.request<T>(method, `/v1/admin${urlPath}`, this.adminToken, body);
    if (res.status >= 300) throw new Error(`${method} /v1/admin${urlPath}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** Lifts the scale plan's limits out of the way: the benchmarks measure Kiln, not its limiter. */
  async liftScalePlanLimits(): Promise<void> {
    await this.admin('PATCH', '/plans/scale', { requestsPerMinute: 10_000_000, maxConcurrentBatches: 10_000 });
  }

  async routeModel(model: string, provider: Record<string, unknown>): Promise<void> {
    await this.admin('PATCH', `/models/${model}`, { provider, enabled: true });
  }

  /** A scale-plan account with a billion credits and one API key. */
  async createAccount(label: string): Promise<BenchAccount> {
    this.accountSeq += 1;
    const email = `${label}-${this.accountSeq}@bench.kiln.local`;
    const { account } = await this.admin<{ account: { id: string } }>('POST', '/accounts', {
      email,
      plan: 'scale',
      credits: 1_000_000_000,
    });
    const { secret } = await this.admin<{ secret: string }>('POST', `/accounts/${account.id}/keys`, { name: 'bench' });
    return { id: account.id, email, key: secret };
  }

  /** POST /v1/batches; throws on anything but 201. */
  async createBatch(account: BenchAccount, body: Record<string, unknown>): Promise<{ id: string; total: number }> {
    const res = await this.request<{ id: string; total: number }>('POST', '/v1/batches', account.key, body);
    if (res.status !== 201) throw new Error(`POST /v1/batches: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /**
   * Batches of these accounts the generator has not settled yet (finished_at is set in the
   * transaction that records a batch's last task, so 0 means every batch reads done: true).
   * Uses the partial index on unfinished batches: polling it costs PostgreSQL next to nothing.
   */
  async unfinishedBatches(accountIds: string[]): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM batches WHERE account_id = ANY($1::uuid[]) AND finished_at IS NULL`,
      [accountIds],
    );
    return rows[0].n;
  }

  /** Tasks of these accounts not yet succeeded or failed (the API's `done` is this reaching 0 per batch). */
  async unfinishedTasks(accountIds: string[]): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM tasks WHERE account_id = ANY($1::uuid[]) AND status IN ('pending', 'queued', 'running')`,
      [accountIds],
    );
    return rows[0].n;
  }

  async taskOutcomes(accountIds: string[]): Promise<{ succeeded: number; failed: number; total: number }> {
    const { rows } = await this.db.query<{ succeeded: number; failed: number; total: number }>(
      `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
              count(*) FILTER (WHERE status = 'failed')::int AS failed,
              count(*)::int AS total
         FROM tasks WHERE account_id = ANY($1::uuid[])`,
      [accountIds],
    );
    return rows[0];
  }

  /**
   * Processes of the shared services this run loads: the PostgreSQL backends of its database
   * plus the server's WAL writer, checkpointer and background writer, and the Redis server.
   */
  async servicePids(): Promise<{ postgres: number[]; redis: number[] }> {
    const { rows } = await this.db.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() OR backend_type IN ('walwriter', 'checkpointer', 'background writer')`,
    );
    if (this.redisPid === undefined) {
      const redis = new Redis(this.opts.redisUrl, { maxRetriesPerRequest: 2 });
      try {
        this.redisPid = Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1] ?? 0) || null;
      } finally {
        redis.disconnect();
      }
    }
    return { postgres: rows.map((r) => r.pid), redis: this.redisPid ? [this.redisPid] : [] };
  }

  private redisPid: number | null | undefined;

  /** Starts the CPU profiler preloaded into a Kiln process (see profiler-preload.ts). */
  startProfiler(child: NodeChild): void {
    if (this.opts.profile && child.running) child.send({ kilnBenchProfiler: 'start' });
  }

  /**
   * A full garbage collection in a Kiln process (through the profiler preload); resolves to
   * its process.memoryUsage() after it, or null when the preload is not there.
   */
  collectGarbage(child: NodeChild): Promise<NodeJS.MemoryUsage | null> {
    return this.askPreload(child, { kilnBenchGc: true }, 'kilnBenchGcDone', 30_000);
  }

  /** Its memory as it is, no collection: process.memoryUsage() and V8's heap spaces (null without the preload). */
  memoryNow(child: NodeChild): Promise<BenchMemory | null> {
    return this.askPreload(child, { kilnBenchMemory: true }, 'kilnBenchMemoryDone', 30_000);
  }

  /** Stops it; resolves to the written .cpuprofile, or null. */
  stopProfiler(child: NodeChild): Promise<string | null> {
    return this.askPreload(child, { kilnBenchProfiler: 'stop' }, 'kilnBenchProfile', 60_000);
  }

  /** Sends the preload `message` and resolves to the `answer` field of its reply (null without the preload). */
  private async askPreload<T>(child: NodeChild, message: object, answer: string, timeoutMs: number): Promise<T | null> {
    if (!this.opts.profile || !child.running) return null;
    const reply = child.nextMessage<Record<string, T | null | undefined>>((m) => !!m && answer in m, timeoutMs);
    child.send(message);
    return (await reply)[answer] ?? null;
  }
}

/** What `memoryNow` answers: process.memoryUsage() and each V8 heap space's size and use, in bytes. */
export interface BenchMemory {
  usage: NodeJS.MemoryUsage;
  spaces: { name: string; size: number; used: number }[];
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(name)}`;
  return u.toString();
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The environment without `name` when it is set to the empty string. */
function withoutEmpty(env: NodeJS.ProcessEnv, ...names: string[]): NodeJS.ProcessEnv {
  const rest = { ...env };
  for (const name of names) if (rest[name] === '') delete rest[name];
  return rest;
}
