/**
 * `npm run chaos [-- --quick] [--tasks=N] [--keep] [--log-level=L]`: a scripted fault run.
 *
 * Starts a PostgreSQL and a Redis of its own (free ports, a temporary directory), two apis
 * and two generators from dist, and clients that create batches through both apis on a
 * model routed to the simulated provider (with failures and 429s, so refunds and retries
 * happen): up to 20 creates in flight, each sent again with its Idempotency-Key until it is
 * answered; a quarter of the batches cancelled 0-4 s after creation, racing the generators;
 * polls, long polls (Prefer: wait) and archive downloads throughout; webhook endpoints on a
 * receiver of its own that is killed for 20 s and restarted. Meanwhile it kills generators
 * (SIGKILL, SIGTERM), kills Redis (-9, restarted empty) and freezes it (SIGSTOP, then
 * SIGCONT), crashes PostgreSQL (immediate shutdown, SIGKILL of the postmaster) and starts it
 * again, and freezes every PostgreSQL process for 15 s. When every batch and delivery has
 * settled it checks the money and consistency invariants in SQL (cancel_refund included),
 * one batch per Idempotency-Key, no webhook event lost or changed, no long poll hung, no
 * archive cut short that looks whole, and prints a table of the faults, the recovery times
 * it measured, and the violations. Exit code 1 on any violation.
 *
 *   --quick       a smoke run: 600 tasks and shorter windows (CHAOS_QUICK=1 too)
 *   --tasks=N     tasks to create (CHAOS_TASKS too; default 3000, quick 600)
 *   --keep        keep the run directory: logs of every process, the data
 *   --log-level=L LOG_LEVEL of Kiln's processes (default info)
 *   --upstreams   the upstream paths too (CHAOS_UPSTREAMS=1): models routed to fake fal,
 *                 Replicate and BFL queues behind a fault proxy (held submits, 503 bursts, hung
 *                 submits), the OpenAI door, the economy tier on a fake OpenAI Batch API, and
 *                 Stripe purchases; invariants one submit per task per route, one batch line per
 *                 task, one credit per payment session (bench/chaos/upstreams.ts)
 *   --pgbouncer   Kiln reaches PostgreSQL through a PgBouncer of the run's own in transaction
 *                 mode, with DATABASE_PREPARED_STATEMENTS=false (npm run test:pgbouncer
 *                 runs the quick run so)
 *   --cpu-hog=N   N processes spinning on a core each for the whole run (default 1 with the
 *                 bare flag): the faults on a machine busy with other work
 */
import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Pool } from 'pg';
import { NodeChild } from '../lib/children';
import { FAST_MODEL } from '../lib/harness';
import { BenchAccount, freePort, GENERATOR_MALLOC_ENV, GENERATOR_NODE_ARGS, KilnStack } from '../lib/kiln';
import { errorMessage, log, round, sleep } from '../lib/util';
import { checkInvariants, InvariantResult, unreferencedResultObjects } from './invariants';
import { ApiEvent, LoadClient } from './load';
import { ChaosReceiver, pendingDeliveries, registerEndpoints, webhookInvariants } from './webhooks';
import { PrivatePgBouncer, PrivatePostgres, PrivateRedis } from './services';
import { StrandedTracer } from './timeline';
import { ChaosUpstreams, DOOR_MODEL, ECONOMY_MODEL, QUEUE_MODELS } from './upstreams';

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

type FaultKind =
  'generator-sigkill' | 'generator-sigterm' | 'redis-kill' | 'redis-freeze' | 'postgres-immediate' | 'postgres-kill' | 'postgres-freeze';

interface FaultSpec {
  kind: FaultKind;
  /** Which generator (0 or 1) a generator fault hits. */
  generator?: number;
  /** How long Redis or PostgreSQL stays down or frozen. */
  downMs?: number;
}

interface Profile {
  tasks: number;
  warmupMs: number;
  /** Each fault's window lasts at least this long; the clients spread their tasks over these. */
  minWindowMs: number;
  /** A window ends this long after the fault ended even if something has not recovered. */
  capMs: number;
  /** Longest wait for every batch to settle at the end. */
  settleMs: number;
  faults: FaultSpec[];
}

const PROFILES: Record<'full' | 'quick', Profile> = {
  full: {
    tasks: 3000,
    warmupMs: 20_000,
    minWindowMs: 35_000,
    capMs: 100_000,
    settleMs: 240_000,
    faults: [
      { kind: 'generator-sigkill', generator: 0 },
      { kind: 'redis-kill', downMs: 5000 },
      { kind: 'generator-sigterm', generator: 1 },
      { kind: 'postgres-immediate', downMs: 5000 },
      { kind: 'redis-freeze', downMs: 15_000 },
      { kind: 'generator-sigkill', generator: 1 },
      { kind: 'postgres-kill', downMs: 5000 },
      { kind: 'postgres-freeze', downMs: 15_000 },
    ],
  },
  quick: {
    tasks: 600,
    warmupMs: 10_000,
    minWindowMs: 15_000,
    capMs: 45_000,
    settleMs: 180_000,
    faults: [
      { kind: 'generator-sigkill', generator: 0 },
      { kind: 'redis-kill', downMs: 3000 },
      { kind: 'postgres-immediate', downMs: 3000 },
      { kind: 'redis-freeze', downMs: 8000 },
      { kind: 'generator-sigterm', generator: 1 },
      { kind: 'postgres-kill', downMs: 3000 },
      { kind: 'postgres-freeze', downMs: 15_000 },
    ],
  },
};

/** The simulated provider: 0.5-3 s per image, so each generator has tasks in flight to lose. */
const LATENCY = { min: 500, max: 3000 };
const SIMULATED_ROUTE = { type: 'simulated', latencyMs: LATENCY, failureRate: 0.05, rateLimitRate: 0.05 };
/** A task still `running` on the same attempt this long after a fault ended was stranded by it. */
const STRANDED_AFTER_MS = LATENCY.max + 3000;
/** Past Kiln's own longest bound (a frozen PostgreSQL: DATABASE_QUERY_TIMEOUT_MS 10 s + 2 s), so a timeout here is a hang. */
const REQUEST_TIMEOUT_MS = 15_000;
const MONITOR_INTERVAL_MS = 500;
const GENERATOR_RESTART_DELAY_MS = 2000;
/** Webhook retries 1 s to 30 s apart: about 2 minutes in all, within the settle wait. */
const CHAOS_WEBHOOK_RETRIES = '1000,2000,4000,8000,15000,30000,30000,30000';
/** The receiver is killed this long after the warm-up, and stays down this long. */
const RECEIVER_KILL_AFTER_MS = 30_000;
const RECEIVER_DOWN_MS = 20_000;
/** After the batches settled, the longest wait for the last webhook deliveries. */
const DELIVERIES_SETTLE_MS = 180_000;
const RICH_ACCOUNTS = 5;
/** One account gets half its share of the credits: its creates answer 402 once it runs out, and refunds trickle back. */
const tightAccountCredits = (tasks: number) => Math.max(20, Math.round(tasks / (RICH_ACCOUNTS + 1) / 2));

/** One fault and what was measured around it. Times are ms epoch. */
interface Window {
  n: number;
  spec: FaultSpec;
  label: string;
  t0: number;
  /** When the fault ended: the kill for a generator, the restart (or SIGCONT) for a server. */
  healedAt: number | null;
  end: number | null;
  /** Tasks `running` just before the fault, with their attempt. */
  snapshot: { ids: string[]; attempts: number[] };
  baselineUnfinished: number;
  progressAt: number | null;
  stranded: number | null;
  strandedRerunAt: number | null;
  caughtUpAt: number | null;
  notes: string[];
}

interface Crash {
  at: number;
  name: string;
  code: number | null;
}

function parseArgs(argv: string[]): {
  profile: Profile;
  quick: boolean;
  keep: boolean;
  logLevel: string;
  pgbouncer: boolean;
  upstreams: boolean;
  cpuHogs: number;
} {
  const flags = new Map<string, string>();
  for (const arg of argv) {
    if (!arg.startsWith('--')) throw new Error(`Unknown argument "${arg}"`);
    const [k, v] = arg.slice(2).split('=', 2);
    flags.set(k, v ?? 'true');
  }
  for (const k of flags.keys())
    if (!['quick', 'tasks', 'keep', 'log-level', 'pgbouncer', 'upstreams', 'cpu-hog'].includes(k)) throw new Error(`Unknown flag --${k}`);
  const quick = flags.has('quick') || process.env.CHAOS_QUICK === '1';
  const profile = { ...PROFILES[quick ? 'quick' : 'full'] };
  const tasks = flags.get('tasks') ?? process.env.CHAOS_TASKS;
  if (tasks !== undefined) {
    profile.tasks = Number(tasks);
    if (!Number.isInteger(profile.tasks) || profile.tasks < 50)
      throw new Error('--tasks (CHAOS_TASKS) takes a whole number of at least 50');
  }
  return {
    profile,
    quick,
    keep: flags.has('keep'),
    logLevel: flags.get('log-level') ?? 'info',
    pgbouncer: flags.has('pgbouncer'),
    upstreams: flags.has('upstreams') || process.env.CHAOS_UPSTREAMS === '1',
    cpuHogs: cpuHogsOf(flags.get('cpu-hog')),
  };
}

function cpuHogsOf(flag: string | undefined): number {
  if (flag === undefined) return 0;
  const n = flag === 'true' ? 1 : Number(flag);
  if (!Number.isInteger(n) || n < 1 || n > 16) throw new Error('--cpu-hog takes a whole number of processes from 1 to 16');
  return n;
}

/** Processes that spin on a core each until killed: other work on the machine. */
function startCpuHogs(n: number): ChildProcess[] {
  return Array.from({ length: n }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
}

/** Restarts a Kiln process that died on its own, as a container's restart policy would. */
class Processes {
  readonly generators: (NodeChild | null)[] = [null, null];
  readonly crashes: Crash[] = [];
  /** When a generator was killed or told to stop (ms epoch). */
  readonly kills: number[] = [];
  /** The second api process (the stack's own is the first), on a port of its own. */
  secondApi: NodeChild | null = null;
  private readonly deliberate = new Set<NodeChild>();
  private runs = 0;
  private stopping = false;

  constructor(private readonly stack: KilnStack) {}

  startGenerator(i: number): NodeChild {
    this.runs += 1;
    const child = NodeChild.start({
      name: `generator-${i}`,
      script: this.stack.distPath('apps/generator/src/main.js'),
      // Retries within the run (the default schedule waits minutes), and a short circuit cooldown
      // so a receiver down for a while has its circuit open and closed within the run too.
      env: this.stack.env({ ...GENERATOR_MALLOC_ENV, WEBHOOK_RETRY_DELAYS_MS: CHAOS_WEBHOOK_RETRIES, WEBHOOK_CIRCUIT_COOLDOWN_MS: '5000' }),
      execArgv: [...GENERATOR_NODE_ARGS],
      logFile: path.join(this.stack.logDir, `generator-${i}.log`),
    });
    this.generators[i] = child;
    void child.exited.then((code) => {
      if (this.stopping || this.deliberate.has(child)) return;
      this.crashes.push({ at: Date.now(), name: child.name, code });
      log(`${child.name} exited on its own (${code}); restarting it`);
      setTimeout(() => {
        if (!this.stopping && this.generators[i] === child) this.startGenerator(i);
      }, 1000);
    });
    return child;
  }

  /** Sends `signal` to generator i; it is restarted once it has exited (and the delay passed). */
  signalGenerator(i: number, signal: NodeJS.Signals): NodeChild {
    const child = this.generators[i];
    if (!child) throw new Error(`generator-${i} is not running`);
    this.deliberate.add(child);
    this.kills.push(Date.now());
    child.proc.kill(signal);
    void child.exited.then(() =>
      setTimeout(() => {
        if (!this.stopping && this.generators[i] === child) this.startGenerator(i);
      }, GENERATOR_RESTART_DELAY_MS),
    );
    return child;
  }

  watchApi(): void {
    const api = this.stack.api;
    if (!api) return;
    void api.exited.then(async (code) => {
      if (this.stopping) return;
      this.crashes.push({ at: Date.now(), name: 'api', code });
      log(`the api exited on its own (${code}); restarting it`);
      while (!this.stopping) {
        try {
          await this.stack.startApi();
          this.watchApi();
          return;
        } catch (err) {
          log(`api restart: ${errorMessage(err)}`);
          await sleep(1000);
        }
      }
    });
  }

  /** A second api on `port`, restarted like the first if it dies on its own. */
  async startSecondApi(port: number): Promise<void> {
    const child = NodeChild.start({
      name: 'api-2',
      script: this.stack.distPath('apps/api/src/main.js'),
      env: this.stack.env({ PORT: String(port) }),
      logFile: path.join(this.stack.logDir, 'api-2.log'),
    });
    this.secondApi = child;
    void child.exited.then((code) => {
      if (this.stopping) return;
      this.crashes.push({ at: Date.now(), name: 'api-2', code });
      log(`api-2 exited on its own (${code}); restarting it`);
      setTimeout(() => void (!this.stopping && this.startSecondApi(port)), 1000);
    });
    for (let i = 0; i < 300; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null);
      if (res?.ok) return;
      await sleep(200);
    }
    throw new Error(`api-2 did not answer /readyz; see ${child.logFile}`);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.generators.filter((g) => g !== null).map((g) => g.stop(40_000)));
    await Promise.all([this.stack.api?.stop(), this.secondApi?.stop()]);
  }
}

/** Reads PostgreSQL every half second, through a pool that gives up fast while it is down. */
class Monitor {
  readonly samples: { at: number; unfinished: number }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  constructor(
    private readonly db: Pool,
    private readonly onTick: () => Promise<void>,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), MONITOR_INTERVAL_MS);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  latestUnfinished(): number | null {
    return this.samples.at(-1)?.unfinished ?? null;
  }

  private async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const { rows } = await this.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM tasks WHERE status IN ('pending', 'queued', 'running')`,
      );
      this.samples.push({ at: Date.now(), unfinished: rows[0].n });
      await this.onTick();
    } catch {
      // PostgreSQL is down: nothing to sample.
    } finally {
      this.busy = false;
    }
  }
}

async function main(): Promise<void> {
  const { profile, quick, keep, logLevel, pgbouncer, upstreams: withUpstreams, cpuHogs } = parseArgs(process.argv.slice(2));
  const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-chaos-'));
  // PostgreSQL runs as the postgres user when this runs as root: it must reach its data dir.
  fs.chmodSync(runDir, 0o755);
  const logDir = path.join(runDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const pg = new PrivatePostgres(REPO_ROOT, await freePort(), path.join(runDir, 'pg'), path.join(logDir, 'postgres.log'));
  const redisDir = path.join(runDir, 'redis');
  fs.mkdirSync(redisDir);
  const redis = new PrivateRedis(await freePort(), redisDir, path.join(logDir, 'redis.log'));
  // Kiln's default DATABASE_QUERY_TIMEOUT_MS, set by the pooler as Kiln sets it without one.
  const pooler = pgbouncer
    ? new PrivatePgBouncer(await freePort(), path.join(runDir, 'pgbouncer'), pg.port, 10_000, path.join(logDir, 'pgbouncer.log'))
    : null;
  // Every process the stack starts inherits it.
  if (pooler) process.env.DATABASE_PREPARED_STATEMENTS = 'false';
  const upstreams = withUpstreams ? new ChaosUpstreams() : null;
  const started = Date.now();

  let stack: KilnStack | null = null;
  let processes: Processes | null = null;
  let client: LoadClient | null = null;
  let monitor: Monitor | null = null;
  let monitorDb: Pool | null = null;
  let tracer: StrandedTracer | null = null;
  const hogs: ChildProcess[] = [];
  let cleaned = false;
  let upstreamsStopped = false;
  let upstreamLoops: Promise<void>[] = [];
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    for (const hog of hogs) hog.kill('SIGKILL');
    log('stopping Kiln, PostgreSQL and Redis');
    monitor?.stop();
    tracer?.stop();
    await client?.stop().catch(() => undefined);
    upstreamsStopped = true;
    await Promise.all(upstreamLoops).catch(() => undefined);
    await processes?.stop().catch(() => undefined);
    await upstreams?.stop();
    await monitorDb?.end().catch(() => undefined);
    await stack?.db?.end().catch(() => undefined);
    await redis.shutdown();
    await pooler?.shutdown();
    await pg.shutdown();
    if (keep) log(`kept: logs and data in ${runDir}`);
    else fs.rmSync(runDir, { recursive: true, force: true });
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: cleaning up`);
      void cleanup().finally(() => process.exit(130));
    });
  }

  try {
    log(`${quick ? 'quick' : 'full'} run: ${profile.tasks} tasks, ${profile.faults.length} faults; run dir ${runDir}`);
    hogs.push(...startCpuHogs(cpuHogs));
    if (cpuHogs > 0) log(`${cpuHogs} CPU hog${cpuHogs > 1 ? 's' : ''} spinning for the whole run`);
    pg.initialise();
    await pg.start();
    await redis.start();
    await pooler?.start();
    if (upstreams) {
      await upstreams.start();
      // Every process the stack starts inherits them: the fakes' keys, Stripe on its fake.
      Object.assign(process.env, upstreams.env());
    }
    log(
      `private PostgreSQL on 127.0.0.1:${pg.port}, Redis on 127.0.0.1:${redis.port}${pooler ? `, PgBouncer (transaction mode) on 127.0.0.1:${pooler.port}` : ''}`,
    );
    stack = new KilnStack({
      repoRoot: REPO_ROOT,
      serverDatabaseUrl: pooler?.url ?? pg.url,
      redisUrl: redis.url,
      runDir,
      logLevel,
      profile: false,
    });
    await stack.setup();
    // Idle connections see PostgreSQL die too; an unhandled 'error' would end the run.
    stack.db.on('error', () => undefined);
    monitorDb = new Pool({
      connectionString: stack.databaseUrl,
      max: 3,
      connectionTimeoutMillis: 2000,
      query_timeout: 5000,
      idleTimeoutMillis: 5000,
    });
    monitorDb.on('error', () => undefined);

    await stack.liftScalePlanLimits();
    await stack.routeModel(FAST_MODEL, SIMULATED_ROUTE);
    if (upstreams) await upstreams.route(stack);
    const accounts: BenchAccount[] = [];
    for (let i = 0; i < RICH_ACCOUNTS; i++) accounts.push(await stack.createAccount('chaos'));
    accounts.push(await tightAccount(stack, tightAccountCredits(profile.tasks)));

    processes = new Processes(stack);
    processes.watchApi();
    processes.startGenerator(0);
    processes.startGenerator(1);

    const receiver = new ChaosReceiver(await freePort());
    await receiver.start();
    await registerEndpoints(stack.baseUrl, accounts.slice(0, RICH_ACCOUNTS), receiver);
    const secondApiPort = await freePort();
    await processes.startSecondApi(secondApiPort);
    const baseUrls = [stack.baseUrl, `http://127.0.0.1:${secondApiPort}`];
    client = new LoadClient({
      baseUrls,
      accounts,
      model: FAST_MODEL,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      // Half the batches on the upstream paths: a tenth on each queue type, a tenth economy, a tenth the OpenAI route.
      upstreamModels: upstreams
        ? [
            ...Object.values(QUEUE_MODELS).map((model) => ({ model, share: 0.1 })),
            { model: ECONOMY_MODEL, share: 0.1, tier: 'economy' as const },
            { model: DOOR_MODEL, share: 0.1 },
          ]
        : undefined,
    });
    const windows: Window[] = [];
    let current: Window | null = null;
    const db = monitorDb;
    tracer = new StrandedTracer(db, redis.url, stack.redisPrefix);
    await tracer.start();
    monitor = new Monitor(db, async () => {
      if (current) await measure(db, current, monitor!, tracer!);
      await tracer!.tick();
    });
    monitor.start();

    // The clients spread the tasks over the warm-up and the fault windows' minimum lengths.
    const spans = [profile.warmupMs, ...profile.faults.map(() => profile.minWindowMs)];
    const paceFor = (index: number) => {
      const remainingMs = spans.slice(index).reduce((a, b) => a + b, 0);
      const remaining = Math.max(0, profile.tasks - client!.acknowledgedTasks);
      const rate = (remaining / remainingMs) * 1000;
      client!.pace(rate, (rate * spans[index]) / 1000);
    };
    paceFor(0);
    client.start();
    if (upstreams) upstreamLoops = upstreams.loops(stack, baseUrls, accounts[0], () => upstreamsStopped);
    log(`warm-up: ${round(profile.warmupMs / 1000, 0)} s of load`);
    await sleep(profile.warmupMs);
    const receiverKill = sleep(RECEIVER_KILL_AFTER_MS).then(() => {
      log(`webhook receiver killed for ${RECEIVER_DOWN_MS / 1000} s`);
      return receiver.killFor(RECEIVER_DOWN_MS).then(() => log('webhook receiver back'));
    });

    for (const [i, spec] of profile.faults.entries()) {
      paceFor(i + 1);
      const window = await openWindow(db, i + 1, spec, monitor);
      windows.push(window);
      current = window;
      log(`fault ${window.n}: ${window.label}`);
      await inject(window, { pg, redis, processes });
      log(`fault ${window.n}: ended ${round((window.healedAt! - window.t0) / 1000, 1)} s after it began`);
      while (!windowDone(window, client.events, profile)) await sleep(250);
      window.end = Date.now();
      current = null;
    }

    client.stopCreating();
    upstreamsStopped = true;
    log(`faults done; waiting up to ${profile.settleMs / 1000} s for every batch to settle`);
    const settleStart = Date.now();
    let settledAt: number | null = null;
    while (Date.now() - settleStart < profile.settleMs) {
      const n = await unfinishedBatches(db).catch(() => null);
      if (n === 0) {
        settledAt = Date.now();
        break;
      }
      await sleep(1000);
    }
    // The door's last request and every purchase event's delivery.
    await Promise.all(upstreamLoops);
    if (settledAt === null) log('some batches did not settle in time: the invariants will say which');
    await client.stop();
    monitor.stop();
    await receiverKill;
    const deliveriesStart = Date.now();
    while (Date.now() - deliveriesStart < DELIVERIES_SETTLE_MS && (await pendingDeliveries(db).catch(() => 1)) > 0) await sleep(1000);
    log(`webhook deliveries settled ${round((Date.now() - deliveriesStart) / 1000, 0)} s after the batches`);
    await receiver.stop();

    const invariants = [
      ...(await checkInvariants(db, {
        acknowledged: [...client.acknowledged.keys()],
        dataDir: stack.dataDir,
        idempotency: client.idempotency,
      })),
      ...(await webhookInvariants(db, receiver, accounts.slice(0, RICH_ACCOUNTS))),
      {
        name: 'long polls answered',
        rule: 'every long poll (Prefer: wait=10) answered within its wait plus 15 s, through Redis and PostgreSQL outages',
        violations: client.longPollsHung.length,
        examples: client.longPollsHung.slice(0, 5).map((at) => new Date(at).toISOString()),
      },
      {
        name: 'archives whole or broken',
        rule: 'an archive answered 200 and read to its end is a whole zip (a failure midway breaks the transfer, never ends it cleanly)',
        violations: client.archivesTruncated,
        examples: [],
      },
    ];
    let upstreamLine = '';
    if (upstreams) {
      const checked = await upstreams.invariants(db, processes.kills);
      invariants.push(...checked.results);
      upstreamLine =
        `${upstreams.summary()} Submits again in the documented window (a submit in flight at a generator kill, or given up at the route's timeout, on a route without a lookup): ` +
        `${checked.crashWindow.length}${checked.crashWindow.length ? ` (${checked.crashWindow.map((c) => `${c.route} ${c.taskId} x${c.submits}, ${c.why}`).join('; ')})` : ''}.`;
      for (const c of checked.crashWindow) log(`documented window: ${c.route} task ${c.taskId} submitted ${c.submits} times (${c.why})`);
      upstreamLine +=
        ` Route chain (${QUEUE_MODELS.fal}: fal, then Replicate), tasks by the route they ended on: ` +
        `${checked.chainRoutes.map((r) => `${r.routeIndex === 0 ? 'fal' : 'Replicate'} ${r.status} ${r.tasks}`).join(', ')}.`;
    }
    const events = receiver.received.size;
    const webhookLine =
      `Webhooks: ${receiver.requests} deliveries received for ${events} events (${receiver.requests - events} received again, under the same webhook-id), ` +
      `the receiver killed for ${RECEIVER_DOWN_MS / 1000} s ${round(RECEIVER_KILL_AFTER_MS / 1000, 0)} s after the warm-up. ` +
      `Long polls: ${client.events.filter((e) => e.kind === 'longpoll').length} (${client.longPollsHung.length} hung). ` +
      `Archives: ${client.events.filter((e) => e.kind === 'archive').length} requested, ${client.archivesWhole} whole zips, ` +
      `${client.events.filter((e) => e.kind === 'archive' && e.outcome !== 'ok').length} refused, failed or broken.`;
    const totals = await taskTotals(db);
    const unreferenced = await unreferencedResultObjects(db, stack.dataDir);
    const report = renderReport({
      quick,
      upstreams: upstreams !== null,
      cpuHogs,
      profile,
      windows,
      events: client.events,
      crashes: processes.crashes,
      invariants,
      totals,
      unreferenced,
      acknowledged: client.acknowledged.size,
      retriedCreates: client.retriedCreates,
      cancels: client.cancelled,
      extra: upstreamLine ? `${webhookLine}\n\n${upstreamLine}` : webhookLine,
      settleSec: settledAt === null ? null : (settledAt - settleStart) / 1000,
      durationSec: (Date.now() - started) / 1000,
    });
    process.stdout.write(report);
    process.stdout.write(tracer.render());
    for (const inv of invariants.filter((v) => v.violations > 0)) {
      log(`VIOLATION ${inv.name} (${inv.violations}): ${inv.rule}; e.g. ${JSON.stringify(inv.examples)}`);
    }
    process.exitCode = invariants.some((v) => v.violations > 0) ? 1 : 0;
  } catch (err) {
    log(`the chaos run failed: ${err instanceof Error ? err.stack : err}`);
    process.exitCode = 1;
  } finally {
    await cleanup();
  }
}

async function tightAccount(stack: KilnStack, credits: number): Promise<BenchAccount> {
  const email = `chaos-tight@bench.kiln.local`;
  const { account } = await stack.admin<{ account: { id: string } }>('POST', '/accounts', { email, plan: 'scale', credits });
  const { secret } = await stack.admin<{ secret: string }>('POST', `/accounts/${account.id}/keys`, { name: 'chaos' });
  return { id: account.id, email, key: secret };
}

function label(spec: FaultSpec): string {
  const down = `${round((spec.downMs ?? 0) / 1000, 0)} s`;
  switch (spec.kind) {
    case 'generator-sigkill':
      return `generator-${spec.generator} SIGKILL`;
    case 'generator-sigterm':
      return `generator-${spec.generator} SIGTERM`;
    case 'redis-kill':
      return `Redis kill -9, down ${down}`;
    case 'redis-freeze':
      return `Redis SIGSTOP ${down}`;
    case 'postgres-immediate':
      return `PostgreSQL immediate stop, down ${down}`;
    case 'postgres-kill':
      return `PostgreSQL kill -9, down ${down}`;
    case 'postgres-freeze':
      return `PostgreSQL SIGSTOP (every process) ${down}`;
  }
}

async function openWindow(db: Pool, n: number, spec: FaultSpec, monitor: Monitor): Promise<Window> {
  const { rows } = await db.query<{ id: string; attempts: number }>(`SELECT id, attempts FROM tasks WHERE status = 'running'`);
  const t0 = Date.now();
  // The backlog before the fault: caught up means back down to it.
  const recent = monitor.samples.filter((s) => s.at >= t0 - 10_000).map((s) => s.unfinished);
  return {
    n,
    spec,
    label: label(spec),
    t0,
    healedAt: null,
    end: null,
    snapshot: { ids: rows.map((r) => r.id), attempts: rows.map((r) => r.attempts) },
    baselineUnfinished: recent.length > 0 ? Math.max(...recent) : (monitor.latestUnfinished() ?? 0),
    progressAt: null,
    stranded: null,
    strandedRerunAt: null,
    caughtUpAt: null,
    notes: [],
  };
}

async function inject(w: Window, deps: { pg: PrivatePostgres; redis: PrivateRedis; processes: Processes }): Promise<void> {
  const { pg, redis, processes } = deps;
  const down = w.spec.downMs ?? 0;
  switch (w.spec.kind) {
    case 'generator-sigkill':
      processes.signalGenerator(w.spec.generator!, 'SIGKILL');
      w.healedAt = Date.now();
      return;
    case 'generator-sigterm': {
      const child = processes.signalGenerator(w.spec.generator!, 'SIGTERM');
      w.healedAt = Date.now();
      void child.exited.then(() => w.notes.push(`exited ${round((Date.now() - w.t0) / 1000, 1)} s after SIGTERM`));
      return;
    }
    case 'redis-kill':
      redis.signal('SIGKILL');
      await redis.waitExit(5000);
      await sleep(down);
      await redis.start();
      w.healedAt = Date.now();
      return;
    case 'redis-freeze':
      redis.signal('SIGSTOP');
      await sleep(down);
      redis.signal('SIGCONT');
      w.healedAt = Date.now();
      return;
    case 'postgres-freeze':
      pg.freezeAll('SIGSTOP');
      await sleep(down);
      pg.freezeAll('SIGCONT');
      w.healedAt = Date.now();
      return;
    case 'postgres-immediate':
    case 'postgres-kill':
      // SIGQUIT is PostgreSQL's immediate shutdown (pg_ctl stop -m immediate): no checkpoint,
      // crash recovery on the next start. SIGKILL of the postmaster is a crash.
      pg.signal(w.spec.kind === 'postgres-kill' ? 'SIGKILL' : 'SIGQUIT');
      await pg.waitExit(10_000);
      await sleep(down);
      await pg.start();
      w.healedAt = Date.now();
      return;
  }
}

/** Called by the monitor while a window is open and PostgreSQL answers. */
async function measure(db: Pool, w: Window, monitor: Monitor, tracer: StrandedTracer): Promise<void> {
  if (w.healedAt === null) return;
  const now = Date.now();
  const healed = w.healedAt;
  if (w.progressAt === null) {
    const { rows } = await db.query<{ at: string | null }>(
      `SELECT (extract(epoch FROM min(finished_at)) * 1000)::bigint::text AS at FROM tasks WHERE finished_at > to_timestamp($1 / 1000.0)`,
      [healed],
    );
    if (rows[0].at !== null) w.progressAt = Number(rows[0].at);
  }
  const unfinished = monitor.latestUnfinished();
  if (w.caughtUpAt === null && unfinished !== null && unfinished <= w.baselineUnfinished) w.caughtUpAt = now;
  if (now - healed >= STRANDED_AFTER_MS && (w.stranded === null || (w.stranded > 0 && w.strandedRerunAt === null))) {
    // Tasks waiting on an upstream (a queue type's request, an economy upstream batch) are
    // the pollers' and collectors' (UPSTREAM_LEASE_MS), not a worker's: counted apart.
    const { rows: all } = await db.query<{ id: string; attempts: number; upstream: boolean }>(
      `SELECT t.id, t.attempts, (t.upstream_poll_at IS NOT NULL OR t.upstream_batch_id IS NOT NULL) AS upstream
         FROM tasks t JOIN unnest($1::uuid[], $2::int[]) AS s(id, attempts) ON s.id = t.id
        WHERE t.status = 'running' AND t.attempts = s.attempts ORDER BY t.updated_at`,
      [w.snapshot.ids, w.snapshot.attempts],
    );
    const rows = all.filter((r) => !r.upstream);
    if (w.stranded === null) {
      const upstream = all.length - rows.length;
      if (upstream > 0) w.notes.push(`${upstream} waiting on an upstream then (not counted as stranded)`);
      w.stranded = rows.length;
      // The first stranded ones (oldest touch first): their timelines say what holds them.
      tracer.trace(w.n, w.label, healed, rows);
    } else if (rows.length === 0) w.strandedRerunAt = now;
  }
}

function firstAnswerAfter(events: ApiEvent[], kind: ApiEvent['kind'], at: number): number | null {
  const e = events.find((ev) => ev.kind === kind && ev.sentAt >= at && (ev.outcome === 'ok' || ev.outcome === 'refused'));
  return e ? e.answeredAt : null;
}

const failed = (e: ApiEvent) => e.outcome === 'server_error' || e.outcome === 'timeout' || e.outcome === 'network';

/**
 * Seconds after the fault ended that requests of this kind still failed (0: none did), or
 * `>N` when the window's last one failed too: not recovered within it.
 */
function apiRecovery(events: ApiEvent[], kind: ApiEvent['kind'], w: Window, end: number): string {
  if (w.healedAt === null) return '-';
  const ofKind = events.filter((e) => e.kind === kind && e.sentAt >= w.t0 && e.sentAt < end);
  if (ofKind.length === 0) return '-';
  const lastFailure = ofKind.filter(failed).at(-1);
  if (!lastFailure) return '0';
  if (lastFailure === ofKind.at(-1)) return `>${round((end - w.healedAt) / 1000, 0)}`;
  return `${round(Math.max(0, lastFailure.answeredAt - w.healedAt) / 1000, 1)}`;
}

function windowDone(w: Window, events: ApiEvent[], profile: Profile): boolean {
  const now = Date.now();
  if (w.healedAt === null) return false;
  if (now - w.healedAt >= profile.capMs) return true;
  if (now - w.t0 < profile.minWindowMs) return false;
  const strandedDone = w.stranded !== null && (w.stranded === 0 || w.strandedRerunAt !== null);
  const apiDone = firstAnswerAfter(events, 'create', w.healedAt) !== null && firstAnswerAfter(events, 'poll', w.healedAt) !== null;
  return strandedDone && apiDone && w.progressAt !== null && w.caughtUpAt !== null;
}

async function unfinishedBatches(db: Pool): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM batches WHERE finished_at IS NULL`);
  return rows[0].n;
}

interface Totals {
  batches: number;
  tasks: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  retried: number;
  maxAttempts: number;
  refunds: number;
  cancelRefunds: number;
}

async function taskTotals(db: Pool): Promise<Totals> {
  const { rows } = await db.query<Totals>(
    `SELECT (SELECT count(*) FROM batches)::int AS batches,
            count(*)::int AS tasks,
            count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
            count(*) FILTER (WHERE status = 'failed')::int AS failed,
            count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled,
            count(*) FILTER (WHERE attempts > 1)::int AS retried,
            COALESCE(max(attempts), 0)::int AS "maxAttempts",
            (SELECT count(*) FROM ledger_entries WHERE kind = 'task_refund')::int AS refunds,
            (SELECT count(*) FROM ledger_entries WHERE kind = 'cancel_refund')::int AS "cancelRefunds"
       FROM tasks`,
  );
  return rows[0];
}

interface ReportInput {
  quick: boolean;
  upstreams: boolean;
  cpuHogs: number;
  profile: Profile;
  windows: Window[];
  events: ApiEvent[];
  crashes: Crash[];
  invariants: InvariantResult[];
  totals: Totals;
  unreferenced: number;
  acknowledged: number;
  retriedCreates: number;
  cancels: number;
  extra: string;
  settleSec: number | null;
  durationSec: number;
}

function renderReport(r: ReportInput): string {
  const secs = (from: number | null, to: number | null, cap: number) =>
    from === null ? '-' : to === null ? `>${round(cap / 1000, 0)}` : `${round(Math.max(0, to - from) / 1000, 1)}`;
  const lines: string[] = [];
  lines.push(
    '',
    `## Chaos run (${r.quick ? 'quick' : 'full'}${r.upstreams ? ', upstreams' : ''}${r.cpuHogs ? `, beside ${r.cpuHogs} CPU hog${r.cpuHogs > 1 ? 's' : ''}` : ''}), ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
  );
  lines.push(
    `${r.totals.tasks} tasks in ${r.totals.batches} batches (${r.totals.succeeded} succeeded, ${r.totals.failed} failed and refunded, ` +
      `${r.totals.cancelled} cancelled and refunded in ${r.totals.cancelRefunds} cancel_refund rows, ` +
      `${r.totals.retried} ran more than once, at most ${r.totals.maxAttempts} attempts); ${r.windows.length} faults; ` +
      `run took ${round(r.durationSec / 60, 1)} min, the last batches settled ${r.settleSec === null ? 'NOT within the wait' : `${round(r.settleSec, 0)} s`} after the last fault.`,
    '',
  );
  lines.push(
    'Times in seconds from the moment the fault ended (the kill for a generator; the restart or SIGCONT for Redis and PostgreSQL).',
    '`api errors until` = the last create / poll that failed (5xx, timeout, no connection) answered this long after it; `progress` = first task finished after it; `stranded` = tasks running',
    `before the fault still on the same attempt ${STRANDED_AFTER_MS / 1000} s after it, and when the last of them ran again; ` +
      '`caught up` = unfinished tasks back down to the backlog before the fault. `>N`: not within the window.',
    '',
  );
  lines.push(
    '| # | fault | api 5xx / requests | api timeouts + conn errors | slowest answer | api errors until: create / poll | progress | stranded | stranded run again | caught up | process exits | notes |',
  );
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const w of r.windows) {
    const end = w.end ?? Date.now();
    const inWindow = r.events.filter((e) => e.sentAt >= w.t0 && e.sentAt < end);
    const fivexx = inWindow.filter((e) => e.outcome === 'server_error').length;
    // Which 5xx: a 503 (dependency down, retry) is the designed answer; a 500 is a defect.
    const byStatus = new Map<number, number>();
    for (const e of inWindow) if (e.outcome === 'server_error') byStatus.set(e.status, (byStatus.get(e.status) ?? 0) + 1);
    const statuses = [...byStatus].map(([status, n]) => `${n}x${status}`).join(' ');
    const lost = inWindow.filter((e) => e.outcome === 'timeout' || e.outcome === 'network').length;
    const healed = w.healedAt;
    const cap = r.profile.capMs;
    const slowest = inWindow.reduce((m, e) => Math.max(m, e.answeredAt - e.sentAt), 0);
    const crashes = r.crashes.filter((c) => c.at >= w.t0 && c.at < end).map((c) => `${c.name} (${c.code})`);
    lines.push(
      `| ${w.n} | ${w.label} | ${fivexx} / ${inWindow.length}${statuses ? ` (${statuses})` : ''} | ${lost} | ${round(slowest / 1000, 1)} | ${apiRecovery(r.events, 'create', w, end)} / ${apiRecovery(r.events, 'poll', w, end)} | ` +
        `${secs(healed, w.progressAt, cap)} | ${w.stranded ?? '-'} | ${w.stranded ? secs(healed, w.strandedRerunAt, cap) : '-'} | ` +
        `${secs(healed, w.caughtUpAt, cap)} | ${crashes.join(', ') || 0} | ${w.notes.join('; ')} |`,
    );
  }
  const count = (pred: (e: ApiEvent) => boolean) => r.events.filter(pred).length;
  lines.push(
    '',
    `Clients: ${count((e) => e.kind === 'create')} creates (${r.acknowledged} answered 201, ${count((e) => e.kind === 'create' && e.status === 402)} 402 ` +
      `from the account short of credits; ${r.retriedCreates} sent again with their Idempotency-Key after no answer), ` +
      `${count((e) => e.kind === 'cancel')} cancels (${r.cancels} answered 200) racing the generators, ${count((e) => e.kind === 'poll')} polls, ` +
      `through 2 api processes and 2 generators with up to 20 creates in flight; ` +
      `${count((e) => e.outcome === 'server_error')} answers 5xx, ${count((e) => e.outcome === 'timeout')} timeouts (${REQUEST_TIMEOUT_MS / 1000} s), ` +
      `${count((e) => e.outcome === 'network')} connection errors in all. ` +
      `Kiln processes that exited on their own: ${r.crashes.length}. Result objects no task references: ${r.unreferenced}.`,
    '',
    r.extra,
    '',
  );
  lines.push('| invariant | rule | violations |', '|---|---|---|');
  for (const inv of r.invariants) lines.push(`| ${inv.name} | ${inv.rule} | ${inv.violations} |`);
  const total = r.invariants.reduce((s, v) => s + v.violations, 0);
  lines.push('', `**Invariant violations: ${total}**`, '');
  return lines.join('\n');
}

main().catch((err) => {
  console.error(err instanceof Error ? err.stack : err);
  process.exit(1);
});
