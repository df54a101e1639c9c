import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Bull from 'bull';
import { DurableFloorRun, FLOOR_GROUP_SIZE, FLOOR_WRITERS, FloorIndexes, runDurableFloor } from '../baselines/durable-floor';
import { runStorageFloor, StorageFloorRun, storedResultImage } from '../baselines/storage-floor';
import { NodeChild, ProcessFigures } from '../lib/children';
import { BenchAccount, BenchMemory, KilnStack } from '../lib/kiln';
import {
  absolute,
  cpuMsPerUnit,
  cpuPerUnit,
  FAST_MODEL,
  measureWindow,
  profiled,
  prompts,
  shouldProfile,
  waitAllDone,
  WindowFigures,
} from '../lib/harness';
import { BenchContext, Figure, ScenarioResult, throughput } from '../lib/types';
import { chunks, log, round } from '../lib/util';

export const PIPELINE_ACCOUNTS = 4;
export const BATCH_SIZE = 100;
/** Kiln's default GENERATOR_CONCURRENCY, set explicitly so the baseline uses the same. */
export const PIPELINE_CONCURRENCY = 50;
/**
 * Issue 47: CPU of every process (generator, api, PostgreSQL, Redis) per task, at most twice
 * the sum of the floors measured in the same run: PostgreSQL's for the task row (the durable
 * floor with tasks' indexes), the storage put's, and raw bull's job (its worker, Redis and its
 * producers). It replaces issue 26's "0.3 of raw bull's tasks/s", which compared a durable
 * system with a no-op queue, and its absolute 0.5 ms, which moved with the machine.
 */
const FLOOR_RATIO_TARGET = 2;
const PROFILE_IMAGES = 3000;
/** Tasks per run of the durable floor (runDurableFloor), three runs of each form, alternated. */
const FLOOR_IMAGES = 10_000;
const FLOOR_REPEATS = 3;

export interface KilnPipelineRun {
  images: number;
  wallSec: number;
  tasksPerSec: number;
  /** When the last POST returned, from the first POST. */
  postsDoneSec: number;
  succeeded: number;
  failed: number;
  window: WindowFigures;
}

/** Scenario 3: images through the real generator (simulated, 0 ms), against raw bull no-op jobs. */
export async function pipeline(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack, opts } = ctx;
  const setup = await preparePipeline(stack);
  const worker = await startRawWorker(ctx);
  const figures: Figure[] = [];
  const runs: Record<string, unknown>[] = [];
  const notes: string[] = [];
  let profiles: ScenarioResult['profiles'] = [];
  let floorRuns: DurableFloorRun[];
  let storageRuns: StorageFloorRun[];
  let apiMemory: NodeJS.MemoryUsage | null;
  try {
    for (const n of opts.pipelineSizes) {
      // Raw bull takes a second or two and swings with the machine's load: the median of
      // three. Kiln's short runs get three too; a long run averages the noise out itself.
      const kilnRepeats = n <= 2000 ? RAW_REPEATS : 1;
      const rawRuns: RawPipelineRun[] = [];
      const kilnRuns: KilnPipelineRun[] = [];
      for (let r = 0; r < RAW_REPEATS; r++) {
        rawRuns.push(await runRawPipeline(stack, worker, n));
        if (r < kilnRepeats) kilnRuns.push(await runKilnPipeline(stack, setup.accounts, n));
        log(
          `pipeline: ${n} images: Kiln ${kilnRuns.map((k) => k.tasksPerSec).join(', ')} tasks/s; raw bull ${rawRuns.map((k) => k.tasksPerSec).join(', ')}`,
        );
      }
      const kiln = medianRun(kilnRuns);
      const raw = medianRun(rawRuns);
      notes.push(
        `CPU ms per task, ${n.toLocaleString('en-US')} images (median runs): ${cpuPerUnit('Kiln:', kiln.window, kiln.tasksPerSec)}; ${cpuPerUnit('raw bull:', raw.window, raw.tasksPerSec)} plus its producers in the bench process ${round((raw.window.benchCores / raw.tasksPerSec) * 1000, 2)}.`,
      );
      for (const k of kilnRuns)
        if (k.failed > 0 || k.succeeded !== n) notes.push(`${n} images: ${k.succeeded} succeeded, ${k.failed} failed.`);
      figures.push({
        ...throughput(`tasks/s, ${n.toLocaleString('en-US')} images`, 'tasks/s', kiln.tasksPerSec, raw.tasksPerSec),
        baselineLabel: 'raw bull (informative)',
      });
      figures.push(absolute(`CPU ms per task, ${n.toLocaleString('en-US')} images`, 'ms', cpuMsPerUnit(kiln.window, kiln.tasksPerSec)));
      runs.push({ images: n, kiln, raw, kilnRuns, rawRuns });
    }
    // What the api's RSS is made of right after the runs, before any collection: V8's spaces
    // (what a GC could give back) against the rest (code, native memory, malloc's arenas).
    const asIs = await stack.memoryNow(stack.api!);
    if (asIs) notes.push(`api right after the runs, no GC: ${describeMemory(asIs)}.`);
    // What the api holds live, after the runs (a GC before them would free what earlier
    // scenarios left and lower the RSS sampled during the runs).
    apiMemory = await stack.collectGarbage(stack.api!);
    if (apiMemory)
      notes.push(
        `api after the runs and a full GC: RSS ${round(apiMemory.rss / 2 ** 20, 0)} MB, heap used ${round(apiMemory.heapUsed / 2 ** 20, 0)} of ${round(apiMemory.heapTotal / 2 ** 20, 0)} MB, external ${round(apiMemory.external / 2 ** 20, 0)} MB.`,
      );
    const floor = await durableFloor(stack);
    figures.push(...floor.figures);
    notes.push(...floor.notes);
    floorRuns = floor.runs;
    const storage = await storageFloor(stack, setup.accounts);
    figures.push(storage.figure);
    notes.push(storage.note);
    storageRuns = storage.runs;
    for (const r of runs) {
      const images = r.images as number;
      const kiln = r.kiln as KilnPipelineRun;
      const raw = r.raw as RawPipelineRun;
      const floors = {
        postgres: floor.kilnIndexesMsPerTask,
        storage: storage.msPerImage,
        rawBull: rawBullMsPerTask(raw),
      };
      const sum = round(floors.postgres + floors.storage + floors.rawBull, 3);
      const kilnMs = cpuMsPerUnit(kiln.window, kiln.tasksPerSec);
      const ratio = round(kilnMs / sum, 2);
      r.floors = { ...floors, sum, ratio };
      figures.push({
        metric: `CPU ms per task of the sum of the floors, ${images.toLocaleString('en-US')} images`,
        unit: 'ms',
        kiln: kilnMs,
        baseline: sum,
        baselineLabel: `floors: PostgreSQL ${floors.postgres} + storage ${floors.storage} + raw bull ${floors.rawBull}`,
        ratio,
        target: `<= ${FLOOR_RATIO_TARGET}`,
        targetOn: 'ratio',
        met: ratio <= FLOOR_RATIO_TARGET,
      });
    }
    // The memory scenario reports the peaks of the largest run.
    ctx.shared.pipelineMemory = {
      runs: runs.map((r) => ({
        images: r.images,
        processes: peakProcesses((r.kilnRuns as KilnPipelineRun[]).map((k) => k.window.processes)),
      })),
    };

    if (
      shouldProfile(
        ctx,
        figures.some((f) => f.met === false),
      )
    ) {
      log(`pipeline: profiled pass of the api and the generator (${PROFILE_IMAGES} images, not counted)`);
      profiles = (await profiled(ctx, [stack.api!, stack.generator!], () => runKilnPipeline(stack, setup.accounts, PROFILE_IMAGES)))
        .profiles;
    }
  } finally {
    await worker.stop();
    await stack.stopGenerator();
  }

  return {
    id: 'pipeline',
    title: 'Pipeline throughput: images through the real generator, first POST to last done',
    method: [
      `Batches of ${BATCH_SIZE} images on a model routed to the simulated provider with 0 ms latency (it still returns a real cached 64 px PNG that Kiln stores), ${PIPELINE_ACCOUNTS} accounts POSTing their share of the batches one after another, in parallel; one generator with GENERATOR_CONCURRENCY=${PIPELINE_CONCURRENCY}, started before and warmed up with one batch.`,
      "Wall time runs from the first POST to the moment the bench, polling every 50 ms, sees every batch of these accounts finished (batches.finished_at, set in the transaction that records a batch's last task; an index lookup, so the polling costs PostgreSQL next to nothing); it then checks that no task is left pending, queued or running, i.e. every batch reads done: true.",
      `Baseline: raw bull on the same Redis under another prefix: a worker process with concurrency ${PIPELINE_CONCURRENCY} running a no-op handler, fed by ${PIPELINE_ACCOUNTS} parallel producers in the bench process doing addBulk of ${BATCH_SIZE} jobs (jobId set, removeOnComplete), first add to last completion.`,
      `Durable floor (diagnostic, no target): ${FLOOR_IMAGES.toLocaleString('en-US')} tasks written straight to a scratch copy of Kiln's tasks table by ${FLOOR_WRITERS} connections, three row versions each in its own transaction (the INSERT of 100 with the batch's foreign key, a take and an end in groups of ${FLOOR_GROUP_SIZE}), no Kiln process, queue or file; PostgreSQL's CPU per task, with all of tasks' indexes and with its primary key alone (bench/baselines/durable-floor.ts). Median of ${FLOOR_REPEATS} runs of each, alternated.`,
      `Storage floor (diagnostic, no target): ${FLOOR_IMAGES.toLocaleString('en-US')} puts of the image Kiln stored in this run through Kiln's local storage driver, ${PIPELINE_CONCURRENCY} at once, with result keys (a directory per image), on the same disk, in the bench process with nothing else running there: its CPU (user + system, libuv's pool included) per image (bench/baselines/storage-floor.ts). Median of ${FLOOR_REPEATS} runs.`,
      `Repeats: raw bull ${RAW_REPEATS} times per size, Kiln ${RAW_REPEATS} times up to 2,000 images and once above, alternating; the median run of each is reported (details.runs[].kilnRuns/rawRuns hold them all).`,
    ],
    figures,
    notes,
    profiles,
    details: { concurrency: PIPELINE_CONCURRENCY, runs, durableFloor: floorRuns, storageFloor: storageRuns, apiMemory },
  };
}

/** The durable floor's two forms, alternated, as figures without a target and a note. */
async function durableFloor(
  stack: KilnStack,
): Promise<{ figures: Figure[]; notes: string[]; runs: DurableFloorRun[]; kilnIndexesMsPerTask: number }> {
  const forms: FloorIndexes[] = ['kiln-indexes', 'primary-key'];
  const runs: DurableFloorRun[] = [];
  for (let r = 0; r < FLOOR_REPEATS; r++) {
    for (const form of forms) runs.push(await runDurableFloor(stack, FLOOR_IMAGES, form));
  }
  const medians = forms.map((form) =>
    medianBy(
      runs.filter((run) => run.indexes === form),
      (run) => run.postgresMsPerTask,
    ),
  );
  log(
    `pipeline: durable floor, PostgreSQL ms per task: ${medians.map((m) => `${m.indexes} ${m.postgresMsPerTask} (${m.tasksPerSec} tasks/s)`).join('; ')}`,
  );
  const label: Record<FloorIndexes, string> = { 'kiln-indexes': "tasks' indexes", 'primary-key': 'primary key alone' };
  return {
    figures: medians.map((m) => absolute(`PostgreSQL CPU ms per task, durable floor (${label[m.indexes]})`, 'ms', m.postgresMsPerTask)),
    notes: medians.map(
      (m) =>
        `Durable floor, ${label[m.indexes]}: ${m.tasksPerSec.toLocaleString('en-US')} tasks/s, PostgreSQL ${m.postgresMsPerTask} ms and its client ${m.clientMsPerTask} ms of CPU per task (${FLOOR_IMAGES.toLocaleString('en-US')} tasks, median of ${FLOOR_REPEATS}).`,
    ),
    runs,
    kilnIndexesMsPerTask: medians[0].postgresMsPerTask,
  };
}

/** Raw bull's CPU per job: its worker, Redis and its producers in the bench process (PostgreSQL has no part in it). */
function rawBullMsPerTask(raw: RawPipelineRun): number {
  const w = raw.window;
  const cores = Object.values(w.processes).reduce((sum, p) => sum + p.cpuCores, 0) + w.redisCores + w.benchCores;
  return round((cores / raw.tasksPerSec) * 1000, 3);
}

/** The storage floor, median of FLOOR_REPEATS runs, as a figure without a target and a note. */
async function storageFloor(
  stack: KilnStack,
  accounts: BenchAccount[],
): Promise<{ figure: Figure; note: string; runs: StorageFloorRun[]; msPerImage: number }> {
  // An image of this scenario's own (the simulated provider's PNG).
  const { rows } = await stack.db.query<{ key: string }>(
    `SELECT result_key AS key FROM tasks WHERE account_id = ANY($1::uuid[]) AND result_key IS NOT NULL LIMIT 1`,
    [accounts.map((a) => a.id)],
  );
  if (rows.length === 0) throw new Error('the pipeline stored no image to measure the storage floor with');
  const image = storedResultImage(stack.dataDir, rows[0].key);
  const runs: StorageFloorRun[] = [];
  const dirs = Array.from({ length: FLOOR_REPEATS }, (_, r) => path.join(stack.dataDir, `storage-floor-${r + 1}`));
  try {
    for (const dir of dirs) runs.push(await runStorageFloor(dir, image, FLOOR_IMAGES, PIPELINE_CONCURRENCY));
  } finally {
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  }
  const m = medianBy(runs, (run) => run.msPerImage);
  log(`pipeline: storage floor, CPU ms per image: ${runs.map((run) => run.msPerImage).join(', ')}`);
  return {
    figure: absolute("CPU ms per image, storage floor (the local driver's put alone)", 'ms', m.msPerImage),
    note: `Storage floor: ${m.msPerImage} ms of CPU per image (user ${m.userMsPerImage}, system ${m.systemMsPerImage}), ${round(m.images / m.wallSec, 0).toLocaleString('en-US')} images/s, ${image.length} bytes each (${FLOOR_IMAGES.toLocaleString('en-US')} puts, median of ${FLOOR_REPEATS}).`,
    runs,
    msPerImage: m.msPerImage,
  };
}

export async function preparePipeline(stack: KilnStack): Promise<{ accounts: BenchAccount[] }> {
  await stack.liftScalePlanLimits();
  await stack.routeModel(FAST_MODEL, { type: 'simulated', latencyMs: 0 });
  const accounts: BenchAccount[] = [];
  for (let i = 0; i < PIPELINE_ACCOUNTS; i++) accounts.push(await stack.createAccount('pipeline'));
  await stack.startGenerator({ GENERATOR_CONCURRENCY: String(PIPELINE_CONCURRENCY) });
  log('pipeline: warm-up batch');
  await stack.createBatch(accounts[0], { model: FAST_MODEL, prompts: prompts(BATCH_SIZE, 'warm-up') });
  await waitAllDone(stack, accounts, 120_000);
  return { accounts };
}

/** N images in batches of 100, spread over the accounts; returns wall time and process figures. */
export async function runKilnPipeline(stack: KilnStack, accounts: BenchAccount[], images: number): Promise<KilnPipelineRun> {
  const before = await stack.taskOutcomes(accounts.map((a) => a.id));
  const sizes = chunks(images, BATCH_SIZE);
  const queues: number[][] = accounts.map(() => []);
  sizes.forEach((size, i) => queues[i % accounts.length].push(size));
  const measured = await measureWindow(stack, { api: stack.api!.pid, generator: stack.generator!.pid });
  const t0 = Date.now();
  try {
    await Promise.all(
      accounts.map(async (account, i) => {
        for (const size of queues[i]) await stack.createBatch(account, { model: FAST_MODEL, prompts: prompts(size, 'pipeline') });
      }),
    );
    const postsDone = Date.now();
    const end = await waitAllDone(stack, accounts, 30 * 60_000);
    const window = await measured();
    const after = await stack.taskOutcomes(accounts.map((a) => a.id));
    const wallSec = (end - t0) / 1000;
    return {
      images,
      wallSec: round(wallSec, 2),
      tasksPerSec: round(images / wallSec, 0),
      postsDoneSec: round((postsDone - t0) / 1000, 2),
      succeeded: after.succeeded - before.succeeded,
      failed: after.failed - before.failed,
      window,
    };
  } finally {
    await measured();
  }
}

async function startRawWorker(ctx: BenchContext): Promise<NodeChild> {
  const child = NodeChild.start({
    name: 'bull-worker',
    script: path.join(ctx.repoRoot, 'dist/bench/baselines/bull-worker.js'),
    env: {
      ...process.env,
      REDIS_URL: ctx.stack.opts.redisUrl,
      RAW_BULL_PREFIX: `${ctx.stack.rawPrefix}:bull`,
      RAW_QUEUE: 'bench-pipeline',
      CONCURRENCY: String(PIPELINE_CONCURRENCY),
    },
    logFile: path.join(ctx.stack.logDir, 'bull-worker.log'),
  });
  await child.nextMessage<{ type: string }>((m) => m.type === 'ready', 20_000);
  return child;
}

interface RawPipelineRun {
  images: number;
  wallSec: number;
  tasksPerSec: number;
  window: WindowFigures;
}

const RAW_REPEATS = 3;

function medianRun<T extends { tasksPerSec: number }>(runs: T[]): T {
  return medianBy(runs, (run) => run.tasksPerSec);
}

/** The run in the middle by `key` (the lower middle of an even count): a real run, not an average. */
function medianBy<T>(runs: T[], key: (run: T) => number): T {
  const sorted = [...runs].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/** Per process, the highest peak RSS over several runs (and the CPU of the run with it). */
function peakProcesses(windows: Record<string, ProcessFigures>[]): Record<string, ProcessFigures> {
  const out: Record<string, ProcessFigures> = {};
  for (const w of windows) {
    for (const [name, p] of Object.entries(w)) {
      if (!out[name] || Math.max(p.peakRssMb, p.hwmMb) > Math.max(out[name].peakRssMb, out[name].hwmMb)) out[name] = p;
    }
  }
  return out;
}

async function runRawPipeline(stack: KilnStack, worker: NodeChild, images: number): Promise<RawPipelineRun> {
  const queue = new Bull('bench-pipeline', stack.opts.redisUrl, { prefix: `${stack.rawPrefix}:bull` });
  await queue.isReady();
  try {
    const expecting = worker.nextMessage<{ type: string }>((m) => m.type === 'expecting', 10_000);
    worker.send({ type: 'expect', n: images });
    await expecting;
    const done = worker.nextMessage<{ type: string; at: number }>((m) => m.type === 'done', 30 * 60_000);
    const sizes = chunks(images, BATCH_SIZE);
    const queues: number[][] = Array.from({ length: PIPELINE_ACCOUNTS }, () => []);
    sizes.forEach((size, i) => queues[i % PIPELINE_ACCOUNTS].push(size));
    const measured = await measureWindow(stack, { worker: worker.pid });
    const t0 = Date.now();
    await Promise.all(
      queues.map(async (mine) => {
        for (const size of mine) {
          await queue.addBulk(
            Array.from({ length: size }, () => {
              const taskId = randomUUID();
              return { name: 'render', data: { taskId }, opts: { jobId: taskId, removeOnComplete: true } };
            }),
          );
        }
      }),
    );
    const { at } = await done;
    const wallSec = (at - t0) / 1000;
    return { images, wallSec: round(wallSec, 2), tasksPerSec: round(images / wallSec, 0), window: await measured() };
  } finally {
    await queue.close();
  }
}

/** RSS, V8's heap (size and use per space that holds more than 1 MB) and the rest of a process, in MB. */
function describeMemory({ usage, spaces }: BenchMemory): string {
  const mb = (b: number): number => round(b / 2 ** 20, 0);
  const heap = spaces.reduce((sum, s) => sum + s.size, 0);
  const bySpace = spaces
    .filter((s) => s.size >= 2 ** 20)
    .map((s) => `${s.name.replace(/_space$/, '')} ${mb(s.used)}/${mb(s.size)}`)
    .join(', ');
  return (
    `RSS ${mb(usage.rss)} MB = V8 heap ${mb(heap)} MB (used/size: ${bySpace}) + array buffers ${mb(usage.arrayBuffers)} MB` +
    ` + the rest ${mb(usage.rss - heap - usage.arrayBuffers)} MB (code, native, malloc)`
  );
}
