/**
 * `npm run bench [-- <scenario>... <flags>]`: starts a Kiln of its own (fresh database,
 * Redis prefix, DATA_DIR, ADMIN_TOKEN and port), runs the scenarios of issue 6 with their
 * same-run baselines, writes the results and removes everything it created.
 *
 *   scenarios        polling conditional long-poll streams archive creation pipeline latency memory
 *                    webhooks upstream-queue openai-door rate-limited failover economy peer-gateway
 *                    (default: all, in this order; webhooks runs the first pipeline size with
 *                    and without endpoints)
 *   --sizes=a,b,c    pipeline image counts (default 1000,10000,30000; the 30,000 point
 *                    takes about 80 s of a full run's 5 minutes on two cores)
 *   --streams=N      progress streams the streams scenario holds (default 1000)
 *   --rounds=N       alternating baseline/Kiln rounds of polling and creation (default 2)
 *   --duration=S     seconds per polling run (default 10); creation runs take half
 *   --profile        profile every Kiln measurement (default: only those short of target)
 *   --no-profile     never take the extra profiled passes
 *   --log-level=L    LOG_LEVEL of Kiln's processes (default info, Kiln's own default)
 *   --out=DIR        where the results go (default: bench/results/latest.* for a full run,
 *                    i.e. every scenario with the default sizes, rounds, durations and
 *                    environment; a temporary directory otherwise)
 *   --keep           keep the database, logs and CPU profiles (paths printed at the end)
 *   --api-env=K=V, --generator-env=K=V
 *                    extra environment for Kiln's api / every generator the bench starts
 *                    (repeatable), to try a setting: --generator-env=UV_THREADPOOL_SIZE=8
 *
 * Expects DATABASE_URL and REDIS_URL (scripts/bench.sh gets them from ensure-services.sh)
 * and a built dist/.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { KilnStack } from './lib/kiln';
import { machineInfo, otherBusyProcesses } from './lib/machine';
import { BenchReport, renderMarkdown, writeReport } from './lib/report';
import { BenchContext, RunOptions, ScenarioId, ScenarioResult, SCENARIOS } from './lib/types';
import { errorMessage, log } from './lib/util';
import { archive } from './scenarios/archive';
import { conditional } from './scenarios/conditional';
import { creation } from './scenarios/creation';
import { latencyBound } from './scenarios/latency';
import { longPoll } from './scenarios/long-poll';
import { streams } from './scenarios/streams';
import { memory } from './scenarios/memory';
import { pipeline } from './scenarios/pipeline';
import { polling } from './scenarios/polling';
import { upstreamQueue } from './scenarios/upstream-queue';
import { economy } from './scenarios/economy';
import { openaiDoor } from './scenarios/openai-door';
import { rateLimited } from './scenarios/rate-limited';
import { failover } from './scenarios/failover';
import { webhooks } from './scenarios/webhooks';
import { peerGateway } from './scenarios/peer-gateway';

const REPO_ROOT = path.resolve(__dirname, '..', '..');
const DEFAULT_SIZES = [1000, 10000, 30000];

const RUNNERS: Record<ScenarioId, (ctx: BenchContext) => Promise<Omit<ScenarioResult, 'durationSec'>>> = {
  polling,
  conditional,
  'long-poll': longPoll,
  streams,
  archive,
  creation,
  pipeline,
  latency: latencyBound,
  memory,
  webhooks,
  'upstream-queue': upstreamQueue,
  economy,
  'openai-door': openaiDoor,
  'rate-limited': rateLimited,
  failover,
  'peer-gateway': peerGateway,
};

function parseArgs(argv: string[]): RunOptions {
  const scenarios: ScenarioId[] = [];
  const flags = new Map<string, string>();
  const apiEnv: Record<string, string> = {};
  const generatorEnv: Record<string, string> = {};
  for (const arg of argv) {
    const env = /^--(api|generator)-env=([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(arg);
    if (env) {
      (env[1] === 'api' ? apiEnv : generatorEnv)[env[2]] = env[3];
    } else if (arg.startsWith('--')) {
      const [k, v] = arg.slice(2).split('=', 2);
      flags.set(k, v ?? 'true');
    } else if ((SCENARIOS as readonly string[]).includes(arg)) {
      scenarios.push(arg as ScenarioId);
    } else {
      throw new Error(`Unknown scenario "${arg}" (expected one of ${SCENARIOS.join(', ')})`);
    }
  }
  const known = ['sizes', 'streams', 'rounds', 'duration', 'profile', 'no-profile', 'log-level', 'out', 'keep'];
  for (const k of flags.keys()) if (!known.includes(k)) throw new Error(`Unknown flag --${k}`);
  const sizes = flags.has('sizes') ? flags.get('sizes')!.split(',').map(Number) : [...DEFAULT_SIZES];
  if (sizes.some((n) => !Number.isInteger(n) || n < 100)) throw new Error('--sizes takes image counts of at least 100');
  const duration = Number(flags.get('duration') ?? 10);
  const rounds = Number(flags.get('rounds') ?? 2);
  if (!(duration >= 1) || !(rounds >= 1)) throw new Error('--duration and --rounds take positive numbers');
  const streamCount = Number(flags.get('streams') ?? 1000);
  if (!Number.isInteger(streamCount) || streamCount < 1) throw new Error('--streams takes a positive whole number');
  // Only a run of every scenario with Kiln's defaults and the default sizes is commit-ready.
  const full =
    scenarios.length === 0 &&
    !['sizes', 'streams', 'rounds', 'duration', 'log-level'].some((k) => flags.has(k)) &&
    Object.keys(apiEnv).length + Object.keys(generatorEnv).length === 0;
  return {
    scenarios: scenarios.length === 0 ? [...SCENARIOS] : SCENARIOS.filter((s) => scenarios.includes(s)),
    streams: streamCount,
    pipelineSizes: sizes,
    rounds,
    pollingDurationSec: duration,
    creationDurationSec: Math.max(1, Math.round(duration / 2)),
    profileAll: flags.has('profile'),
    noProfile: flags.has('no-profile'),
    keep: flags.has('keep'),
    logLevel: flags.get('log-level') ?? 'info',
    apiEnv,
    generatorEnv,
    outDir: path.resolve(flags.get('out') ?? (full ? path.join(REPO_ROOT, 'bench/results') : path.join(os.tmpdir(), 'kiln-bench-results'))),
    full,
  };
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const serverDatabaseUrl = process.env.DATABASE_URL;
  const redisUrl = process.env.REDIS_URL;
  if (!serverDatabaseUrl || !redisUrl) throw new Error('DATABASE_URL and REDIS_URL must be set (npm run bench sets them)');
  const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-'));
  const stack = new KilnStack({
    repoRoot: REPO_ROOT,
    serverDatabaseUrl,
    redisUrl,
    runDir,
    logLevel: opts.logLevel,
    profile: true,
    apiEnv: opts.apiEnv,
    generatorEnv: opts.generatorEnv,
  });
  const started = Date.now();
  const concurrentWork = new Set<string>();
  const ownPids = () => [process.pid, stack.api?.proc.pid, stack.generator?.proc.pid].filter((p): p is number => !!p);
  const noiseTimer = setInterval(() => otherBusyProcesses(ownPids()).forEach((c) => concurrentWork.add(c)), 5000);

  let tornDown = false;
  const teardown = async () => {
    if (tornDown) return;
    tornDown = true;
    clearInterval(noiseTimer);
    log('stopping Kiln and removing its database and Redis keys');
    await stack.teardown(opts.keep);
    if (opts.keep) log(`kept: database ${stack.dbName}, logs and profiles in ${runDir}`);
    else fs.rmSync(runDir, { recursive: true, force: true });
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: cleaning up`);
      void teardown().finally(() => process.exit(130));
    });
  }

  let failed = false;
  try {
    log(`scenarios: ${opts.scenarios.join(', ')}; pipeline sizes ${opts.pipelineSizes.join(', ')}`);
    await stack.setup();
    const machine = await machineInfo(REPO_ROOT, stack.db, redisUrl);
    otherBusyProcesses(ownPids()).forEach((c) => concurrentWork.add(c));
    const ctx: BenchContext = { stack, opts, repoRoot: REPO_ROOT, shared: {} };
    const results: ScenarioResult[] = [];
    for (const id of opts.scenarios) {
      const t0 = Date.now();
      log(`--- ${id}`);
      try {
        const r = await RUNNERS[id](ctx);
        results.push({ ...r, durationSec: Math.round((Date.now() - t0) / 1000) });
      } catch (err) {
        failed = true;
        log(`${id} failed: ${err instanceof Error ? err.stack : err}`);
        await stack.stopGenerator().catch(() => undefined);
        results.push({
          id,
          title: id,
          method: [],
          figures: [],
          notes: [],
          profiles: [],
          details: {},
          durationSec: Math.round((Date.now() - t0) / 1000),
          error: errorMessage(err),
        });
      }
    }
    const { outDir, ...optionsForReport } = opts;
    const report: BenchReport = {
      generatedAt: new Date().toISOString(),
      command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      kind: opts.full ? 'full' : 'partial',
      durationSec: Math.round((Date.now() - started) / 1000),
      machine,
      options: optionsForReport,
      concurrentWork: [...concurrentWork],
      scenarios: results,
      notes: runNotes(opts, results),
      findings: readFindings(),
    };
    const files = writeReport(
      report,
      outDir,
      opts.full || process.argv.some((a) => a.startsWith('--out')) ? 'latest' : `partial-${stack.id}`,
    );
    process.stdout.write(renderMarkdown(report));
    log(`results: ${files.md} and ${files.json}`);
  } finally {
    await teardown();
  }
  // Benchmarks report; a failed scenario is in the results, and the exit code says so too.
  process.exitCode = failed ? 1 : 0;
}

/** The hand-written analysis kept beside the bench, included in the results when present. */
function readFindings(): string | null {
  const file = path.join(REPO_ROOT, 'bench/findings.md');
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
}

/** Notes on the run as a whole; scenario-specific findings live in each scenario's notes. */
function runNotes(opts: RunOptions, results: ScenarioResult[]): string[] {
  const notes: string[] = [];
  if (opts.scenarios.includes('pipeline') && opts.pipelineSizes.join() !== DEFAULT_SIZES.join()) {
    notes.push(`Pipeline sizes ${opts.pipelineSizes.join(', ')} instead of the default ${DEFAULT_SIZES.join(', ')}.`);
  }
  const extra = [
    ...Object.entries(opts.apiEnv).map(([k, v]) => `api ${k}=${v}`),
    ...Object.entries(opts.generatorEnv).map(([k, v]) => `generator ${k}=${v}`),
  ];
  if (extra.length > 0) notes.push(`Run with extra environment: ${extra.join(', ')}; not Kiln's defaults.`);
  notes.push(
    `Kiln's processes ran from dist with NODE_ENV=production and LOG_LEVEL=${opts.logLevel}, their output going to log files; the load generator (autocannon) and the bench share the machine's cores with them, as do PostgreSQL and Redis.`,
  );
  const short = results.flatMap((s) => s.figures.filter((f) => f.met === false).map((f) => `${s.id} ${f.metric}`));
  if (short.length > 0) notes.push(`Short of target: ${short.join('; ')}. See the profiles and notes of those scenarios.`);
  return notes;
}

main().catch((err) => {
  console.error(err instanceof Error ? err.stack : err);
  process.exit(1);
});
